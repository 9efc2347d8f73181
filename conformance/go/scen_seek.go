package main

import (
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// exclusiveEarliest subscribes "sub" and first leaves a "holder" subscription
// that never consumes, so that the acknowledged messages stay stored on both
// brokers (without retention letterbox deletes acknowledged entries within
// seconds, Pulsar only when a ledger rolls over: docs/compatibility.md).
func exclusiveEarliest(c pulsar.Client, topic string) (pulsar.Consumer, error) {
	holder, err := c.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "holder", Type: pulsar.Exclusive,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		return nil, err
	}
	holder.Close()
	return c.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "sub", Type: pulsar.Exclusive,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
}

// seekByID: m0..m4 consumed and acked, then Seek(id of m2): m2..m4 come again.
func seekByID(e *env) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	cons, err := exclusiveEarliest(c, e.topic())
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	p, err := producer(c, e.topic())
	if err != nil {
		return nil, err
	}
	defer p.Close()
	ids, err := sendN(p, 5)
	if err != nil {
		return nil, err
	}
	first, err := drain(cons, true)
	if err != nil {
		return nil, err
	}
	seekErr := cons.Seek(ids[2])
	again, err := drain(cons, true)
	if err != nil {
		return nil, err
	}
	return map[string]any{"first": first, "seek_error": errName(seekErr), "after_seek": again}, nil
}

// seekByTime: SeekByTime before m0 replays everything; SeekByTime after the
// last publish replays nothing.
func seekByTime(e *env) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	cons, err := exclusiveEarliest(c, e.topic())
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	p, err := producer(c, e.topic())
	if err != nil {
		return nil, err
	}
	defer p.Close()
	before := time.Now().Add(-time.Second)
	if _, err := sendN(p, 3); err != nil {
		return nil, err
	}
	first, err := drain(cons, true)
	if err != nil {
		return nil, err
	}
	errBefore := cons.SeekByTime(before)
	replay, err := drain(cons, true)
	if err != nil {
		return nil, err
	}
	errAfter := cons.SeekByTime(time.Now().Add(time.Second))
	none, err := drain(cons, true)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"first": first, "seek_before_error": errName(errBefore), "replay": replay,
		"seek_after_error": errName(errAfter), "after_late_seek": none,
	}, nil
}
