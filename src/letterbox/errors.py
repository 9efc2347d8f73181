# One error hierarchy for the broker. Every error a client can cause maps onto
# one of Pulsar's ServerError codes (values are the wire enum numbers of
# `ServerError` in the protocol schema), so handlers can turn any raised
# LetterboxError into an ERROR / SEND_ERROR frame without a lookup table.
from __future__ import annotations

import enum


class ServerError(enum.IntEnum):
    UnknownError = 0
    MetadataError = 1
    PersistenceError = 2
    AuthenticationError = 3
    AuthorizationError = 4
    ConsumerBusy = 5
    ServiceNotReady = 6
    ProducerBlockedQuotaExceededError = 7
    ProducerBlockedQuotaExceededException = 8
    ChecksumError = 9
    UnsupportedVersionError = 10
    TopicNotFound = 11
    SubscriptionNotFound = 12
    ConsumerNotFound = 13
    TooManyRequests = 14
    TopicTerminatedError = 15
    ProducerBusy = 16
    InvalidTopicName = 17
    IncompatibleSchema = 18
    ConsumerAssignError = 19
    TransactionCoordinatorNotFound = 20
    InvalidTxnStatus = 21
    NotAllowedError = 22
    TransactionConflict = 23
    TransactionNotFound = 24
    ProducerFenced = 25


class LetterboxError(Exception):
    """Base class: an error reported to a client with a Pulsar error code."""

    code: ServerError = ServerError.UnknownError

    def __init__(self, message: str, code: ServerError | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self)


class InvalidTopicName(LetterboxError):
    code = ServerError.InvalidTopicName


class TopicNotFound(LetterboxError):
    code = ServerError.TopicNotFound


class SubscriptionNotFound(LetterboxError):
    code = ServerError.SubscriptionNotFound


class ConsumerBusy(LetterboxError):
    code = ServerError.ConsumerBusy


class ProducerBusy(LetterboxError):
    code = ServerError.ProducerBusy


class ProducerFenced(LetterboxError):
    code = ServerError.ProducerFenced


class NotAllowed(LetterboxError):
    code = ServerError.NotAllowedError


class ServiceNotReady(LetterboxError):
    code = ServerError.ServiceNotReady


class PersistenceError(LetterboxError):
    code = ServerError.PersistenceError


class ChecksumError(LetterboxError):
    code = ServerError.ChecksumError


class IncompatibleSchema(LetterboxError):
    code = ServerError.IncompatibleSchema
