package main

import (
	"context"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// transactionUnsupported: a client with EnableTransaction, then NewTransaction.
// A broker without a transaction coordinator must refuse, not hang: recorded
// is where it failed and the error's name ("Hung" if a call did not return).
func transactionUnsupported(e *env) (any, error) {
	c, err := within(20*time.Second, func() (pulsar.Client, error) {
		return e.client(func(o *pulsar.ClientOptions) { o.EnableTransaction = true })
	})
	if err != nil {
		return map[string]any{"failed_at": "new_client", "error": errName(err)}, nil
	}
	defer c.Close()
	txn, err := within(20*time.Second, func() (pulsar.Transaction, error) { return c.NewTransaction(10 * time.Second) })
	if err != nil {
		return map[string]any{"failed_at": "new_transaction", "error": errName(err)}, nil
	}
	abortErr := txn.Abort(context.Background())
	return map[string]any{"failed_at": "", "abort_error": errName(abortErr)}, nil
}
