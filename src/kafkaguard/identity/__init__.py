"""Who a client is, decided from what it presents, exactly as Kafka decides it: a certificate's subject in Java's
RFC 2253 form mapped by ``ssl.principal.mapping.rules`` (``x500``, ``ssl_mapping``), an OAUTHBEARER token validated
as Kafka's ``OAuthBearerValidatorCallbackHandler`` does (``oauth``, ``jwks``, ``oauthbearer``), a Kerberos ticket
accepted over MIT Kerberos and its principal named by ``sasl.kerberos.principal.to.local.rules`` (``kerberos``,
``kerberos_names``).

Below the protocol package and beside ``scram``: nothing here reads a socket or a store; the connection
(``protocol.connection``) asks, and turns the answers into a principal.
"""
