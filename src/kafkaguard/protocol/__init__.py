"""The Kafka wire and one client connection: framing with sizes checked before buffering (``framing``), the request
header (``header``), every declared length checked before kio reads a body (``lengths``), decoding and encoding
(``codec``, ``build``, the generated ``messages`` and ``builders``), the closed set of replies and the one writer of a
socket (``replies``, ``outbox``), the connection itself (``connection``, with ``prelogin``, ``sessions`` and
``violations``), SASL and its mechanisms (``sasl``, ``mechanisms``, ``identity``), and what a handler sees of a
request (``scope``). The process that accepts connections is ``node``; what answers them is ``server`` or ``proxy``."""
