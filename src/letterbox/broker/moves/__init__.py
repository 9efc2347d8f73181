"""Moving messages between topics: dead-letter routing, the message mover, moved entries, the
dead letters view, purge and redrive, all through the one move transaction (move_transaction.py)."""
