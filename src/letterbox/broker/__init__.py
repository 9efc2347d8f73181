"""The broker: asyncio over the sans-IO protocol and the managed ledger, in rooms by
responsibility; service.py composes them. This face is all that admin and standalone may use:
the service, the topic model, and the operations the admin API performs (some as modules)."""
from letterbox.broker.compaction.compactor import THRESHOLD_POLICY, CompactionInProgress
from letterbox.broker.moves import redrive
from letterbox.broker.moves.dead_letter_groups import failure_groups, summary_async
from letterbox.broker.moves.dead_letter_router import dead_letter_topic_name
from letterbox.broker.moves.dead_letters import (
    DeadLetter,
    DeadLetterFilter,
    live_dead_letters_async,
    stored_message,
)
from letterbox.broker.moves.message_mover import MoveRequest, move_message
from letterbox.broker.moves.redrive_targets import SubscriptionGone
from letterbox.broker.moves.redrive_tasks import TASK_ID, RedriveTask
from letterbox.broker.policies import namespace_policies, topic_policies
from letterbox.broker.policies.default_namespace import seed_defaults
from letterbox.broker.policies.dispatch_rate import SUBSCRIPTION_RATE, TOPIC_RATE
from letterbox.broker.policies.namespace_limits import check_new_subscription, check_new_topic
from letterbox.broker.policies.namespace_policies import NAMESPACE_KEY
from letterbox.broker.redelivery.poison_suspects import max_redeliveries, suspect_count, suspects
from letterbox.broker.schemas import avro_resolution
from letterbox.broker.schemas.schema_registry import (
    STRATEGIES,
    STRATEGY_POLICY,
    TYPE_NAMES,
    SchemaVersion,
    check_definition,
    type_name,
)
from letterbox.broker.service import PARTITIONS_KEY, BrokerService
from letterbox.broker.topics import inactive_topics, subscription_admin, topic_termination
from letterbox.broker.topics.consumer import SUB_TYPE_NAMES, Consumer
from letterbox.broker.topics.producer import ACCESS_MODE_NAMES
from letterbox.broker.topics.subscription import Subscription
from letterbox.broker.topics.topic import NonPersistentTopic, PersistentTopic, Topic

__all__ = [
    "ACCESS_MODE_NAMES", "NAMESPACE_KEY", "PARTITIONS_KEY", "STRATEGIES", "STRATEGY_POLICY",
    "SUBSCRIPTION_RATE", "SUB_TYPE_NAMES", "TASK_ID", "THRESHOLD_POLICY", "TOPIC_RATE", "TYPE_NAMES",
    "BrokerService", "CompactionInProgress", "Consumer", "DeadLetter", "DeadLetterFilter",
    "MoveRequest", "NonPersistentTopic", "PersistentTopic", "RedriveTask", "SchemaVersion",
    "Subscription", "SubscriptionGone", "Topic", "avro_resolution", "check_definition",
    "check_new_subscription", "check_new_topic", "dead_letter_topic_name", "failure_groups", "inactive_topics",
    "live_dead_letters_async", "max_redeliveries", "move_message", "namespace_policies", "redrive",
    "seed_defaults", "stored_message", "subscription_admin", "summary_async", "suspect_count", "suspects",
    "topic_policies", "topic_termination", "type_name",
]
