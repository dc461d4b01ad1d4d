"""The node's process, shared by ``kafkaguard serve`` and ``kafkaguard proxy``: its listeners and the accept loop
(``listening``, ``accept``), who may connect (``admission``, ``trusted``, ``proxy_header``), the background work of
a process (``collector``, ``descriptors``) and the shadow-ACL and permissive-mode watch (``rollout_watch``). Each
client connection it accepts is run by ``protocol.connection``."""
