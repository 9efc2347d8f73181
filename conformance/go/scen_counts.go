package main

import (
	"fmt"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// nackExclusiveCount: m0 nacked twice on an Exclusive subscription: the
// redelivery counts seen (Pulsar counts only on Shared/Key_Shared).
func nackExclusiveCount(e *env) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{
		Topic: e.topic(), SubscriptionName: "sub", Type: pulsar.Exclusive,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		NackRedeliveryDelay:         time.Second,
	})
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	p, err := producer(c, e.topic())
	if err != nil {
		return nil, err
	}
	defer p.Close()
	if _, err := sendN(p, 1); err != nil {
		return nil, err
	}
	var counts []uint32
	for i := 0; i < 3; i++ {
		m, err := mustRecv(cons, fmt.Sprintf("delivery %d", i))
		if err != nil {
			return nil, err
		}
		counts = append(counts, m.RedeliveryCount())
		if i < 2 {
			cons.Nack(m)
		} else {
			_ = cons.Ack(m)
		}
	}
	more, err := drain(cons, true)
	if err != nil {
		return nil, err
	}
	return map[string]any{"redelivery_counts": counts, "after": more}, nil
}

// countAcrossReconnect: on Shared, m0 is nacked once (count 1 seen), then its
// consumer closes without acking; the count a new consumer then sees.
func countAcrossReconnect(e *env) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	opts := pulsar.ConsumerOptions{
		Topic: e.topic(), SubscriptionName: "sub", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		NackRedeliveryDelay:         time.Second,
	}
	cons, err := c.Subscribe(opts)
	if err != nil {
		return nil, err
	}
	p, err := producer(c, e.topic())
	if err != nil {
		cons.Close()
		return nil, err
	}
	defer p.Close()
	if _, err := sendN(p, 1); err != nil {
		cons.Close()
		return nil, err
	}
	var before []uint32
	for i := 0; i < 2; i++ {
		m, err := mustRecv(cons, fmt.Sprintf("delivery %d", i))
		if err != nil {
			cons.Close()
			return nil, err
		}
		before = append(before, m.RedeliveryCount())
		if i == 0 {
			cons.Nack(m)
		}
	}
	cons.Close()
	cons2, err := c.Subscribe(opts)
	if err != nil {
		return nil, err
	}
	defer cons2.Close()
	m, err := mustRecv(cons2, "m0 after reconnect")
	if err != nil {
		return nil, err
	}
	_ = cons2.Ack(m)
	more, err := drain(cons2, true)
	if err != nil {
		return nil, err
	}
	return map[string]any{"before_close": before, "after_reconnect": m.RedeliveryCount(), "after": more}, nil
}
