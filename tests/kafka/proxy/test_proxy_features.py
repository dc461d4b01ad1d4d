"""ApiVersions v3+ through the proxy against the real Kafka 3.9 broker: the cluster's features are passed on as the
proxy's rule says (``proxy.versions.negotiate_features``) — the broker's own answer filtered by what the proxy
offers, never a feature level whose APIs the proxy does not offer — and at v3 without the min-0 supported
features, as Kafka answers v3 (KAFKA-17492)."""

from __future__ import annotations

from typing import Any

from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsRequestV3
from kio.schema.api_versions.v4.request import ApiVersionsRequest as ApiVersionsRequestV4

from kafkaguard.protocol.api_versions import Features
from kafkaguard.proxy.versions import negotiate_features, servable_level
from tests.kafka.broker import KafkaBroker
from tests.serving import ServerHandle
from tests.wire import Wire


def ask(address: tuple[str, int], request: Any) -> Any:
    with Wire(address, timeout=20) as wire:  # before login, as every client asks
        return wire.request(request)


def features(answer: Any) -> Features:
    return Features(
        tuple((f.name, int(f.min_version), int(f.max_version)) for f in answer.supported_features),
        tuple((f.name, int(f.min_version_level), int(f.max_version_level)) for f in answer.finalized_features),
        int(answer.finalized_features_epoch),
    )


def test_the_brokers_features_are_passed_on_filtered_by_what_the_proxy_offers(proxy: ServerHandle, kafka: KafkaBroker):
    host, port = kafka.bootstrap.rsplit(":", 1)
    v3 = ApiVersionsRequestV3(client_software_name="features-test", client_software_version="1")
    v4 = ApiVersionsRequestV4(client_software_name="features-test", client_software_version="1")
    direct = features(ask((host, int(port)), v4))
    through = ask(proxy.sasl, v4)
    offered = {key: (int(k.min_version), int(k.max_version)) for k in through.api_keys for key in [int(k.api_key)]}
    expected = negotiate_features(direct, offered)  # type: ignore[arg-type]
    # the levels as the rule says; the epoch is the broker's metadata offset when the proxy read them at start (KRaft
    # moves it with every metadata change), so it is at most the broker's now
    assert (features(through).supported, features(through).finalized) == (expected.supported, expected.finalized)
    assert 0 <= features(through).epoch <= direct.epoch
    metadata = [f for f in direct.finalized if f[0] == "metadata.version"]
    # a feature no client protocol depends on is passed on as the broker finalized it
    assert metadata and metadata[0] in features(through).finalized
    for name, _low, high in features(through).finalized:
        assert high <= servable_level(name, offered)  # type: ignore[arg-type]
    at_v3 = features(ask(proxy.sasl, v3))
    assert at_v3.supported == tuple(f for f in features(through).supported if f[1] > 0)
    assert at_v3.finalized == features(through).finalized
