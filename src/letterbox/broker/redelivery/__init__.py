"""When a message comes back: redelivery tracking and policy, the delayed index, the delivery
attempt log, key quarantine, poison suspects, dead-letter rate and expiry."""
