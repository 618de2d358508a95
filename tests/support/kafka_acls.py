"""ACLs on the test broker (tests/support/kafka_server.py), one operation at a time, so a test proves
exactly the rights the documentation asks for (``grant`` there allows everything).

``allow(kafka, principal, operation, topics=(), groups=())``
    Allow ``principal`` (``User:lineage``) one operation (``"READ"``, ``"WRITE"`` ...) on these
    topics and consumer groups (Kafka implies DESCRIBE from READ and WRITE).
``revoke(kafka, principal, topic)``
    Remove every ACL of ``principal`` on ``topic``.
"""

from __future__ import annotations

from collections.abc import Iterable

from tests.support.kafka_server import SecuredKafka


def allow(kafka: SecuredKafka, principal: str, operation: str, *, topics: Iterable[str] = (), groups: Iterable[str] = ()) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import ACL, ACLOperation, ACLPermissionType, ResourcePattern, ResourceType

    patterns = [ResourcePattern(ResourceType.TOPIC, topic) for topic in topics]
    patterns += [ResourcePattern(ResourceType.GROUP, group) for group in groups]
    acls = [ACL(principal, "*", ACLOperation[operation], ACLPermissionType.ALLOW, pattern) for pattern in patterns]
    admin = KafkaAdminClient(bootstrap_servers=kafka.plaintext, request_timeout_ms=15_000)
    try:
        result = admin.create_acls(acls)
    finally:
        admin.close()
    if result["failed"]:
        raise RuntimeError(f"ACLs not created: {result['failed']}")


def revoke(kafka: SecuredKafka, principal: str, topic: str) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ResourcePattern, ResourceType

    admin = KafkaAdminClient(bootstrap_servers=kafka.plaintext, request_timeout_ms=15_000)
    try:
        pattern = ResourcePattern(ResourceType.TOPIC, topic)
        admin.delete_acls([ACLFilter(principal, "*", ACLOperation.ANY, ACLPermissionType.ANY, pattern)])
    finally:
        admin.close()
