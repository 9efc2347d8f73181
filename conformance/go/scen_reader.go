package main

import (
	"context"
	"errors"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// next reads one message within d; errNoMessage when none came.
func next(r pulsar.Reader, d time.Duration) (pulsar.Message, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	m, err := r.Next(ctx)
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		return nil, errNoMessage
	}
	return m, err
}

// createReader is CreateReader bounded in time: a reader from Latest, inclusive,
// asks the broker for the last message id, and the client retries that without
// end when the broker answers with an error.
func createReader(c pulsar.Client, o pulsar.ReaderOptions) (pulsar.Reader, error) {
	return within(20*time.Second, func() (pulsar.Reader, error) { return c.CreateReader(o) })
}

// hasNext is Reader.HasNext bounded in time: "hung" when it did not answer.
func hasNext(r pulsar.Reader) any {
	v, err := within(15*time.Second, func() (bool, error) { return r.HasNext(), nil })
	if err != nil {
		return "hung"
	}
	return v
}

// readAll reads until quietWait passes with nothing.
func readAll(r pulsar.Reader) ([]string, error) {
	got := []string{}
	for len(got) < 1000 {
		m, err := next(r, quietWait)
		if errors.Is(err, errNoMessage) {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		got = append(got, string(m.Payload()))
	}
	return got, nil
}

// readerEarliestHasNext: a reader from Earliest reads m0..m2; HasNext is true
// before and false at the end.
func readerEarliestHasNext(e *env) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	p, err := producer(c, e.topic())
	if err != nil {
		return nil, err
	}
	defer p.Close()
	if _, err := sendN(p, 3); err != nil {
		return nil, err
	}
	r, err := createReader(c, pulsar.ReaderOptions{Topic: e.topic(), StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	before := hasNext(r)
	got, err := readAll(r)
	if err != nil {
		return nil, err
	}
	return map[string]any{"has_next_before": before, "read": got, "has_next_at_end": hasNext(r)}, nil
}

// readerLatest: a reader from Latest sees nothing of m0, m1 and has no next;
// it reads m2 published after it; a Latest reader with StartMessageIDInclusive
// starts at the last message, m2.
func readerLatest(e *env) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	p, err := producer(c, e.topic())
	if err != nil {
		return nil, err
	}
	defer p.Close()
	if _, err := sendN(p, 2); err != nil {
		return nil, err
	}
	r, err := createReader(c, pulsar.ReaderOptions{Topic: e.topic(), StartMessageID: pulsar.LatestMessageID()})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	hasBefore := hasNext(r)
	if _, err := send(p, &pulsar.ProducerMessage{Payload: []byte("m2")}); err != nil {
		return nil, err
	}
	got, err := readAll(r)
	if err != nil {
		return nil, err
	}
	inc, err := createReader(c, pulsar.ReaderOptions{Topic: e.topic(), StartMessageID: pulsar.LatestMessageID(),
		StartMessageIDInclusive: true})
	if err != nil {
		return nil, err
	}
	defer inc.Close()
	incGot, err := readAll(inc)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"has_next_before_m2": hasBefore, "read": got, "has_next_at_end": hasNext(r),
		"inclusive_read": incGot,
	}, nil
}
