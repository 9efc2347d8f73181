"""Topics, producers, subscriptions, consumers and the dispatchers per subscription type."""
