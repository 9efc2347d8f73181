"""Topics, producers, subscriptions, consumers and the dispatchers per subscription type, and
what acts on live topics: backlog quota enforcement, termination, inactive-topic deletion,
message expiry and the admin operations on a subscription."""
