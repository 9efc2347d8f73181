package main

import (
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// delayed publishes m0 delayed by 2 s (set by `mark`) then m1 and m2 at
// once, to a subscription of the given type, and records the arrival order and whether m0
// came no earlier than 1 s after it was sent. Pulsar delivers a delayed
// message up to one delayedDeliveryTickTimeMillis (1 s) before its time when
// delayedDeliveryDeliverAtTimeStrict is false (its default), so the 2 s delay
// only promises 1 s there (less 100 ms for the clocks' rounding).
func delayed(e *env, subType pulsar.SubscriptionType, mark func(m *pulsar.ProducerMessage, sentAt time.Time)) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{
		Topic: e.topic(), SubscriptionName: "sub", Type: subType,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
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
	sentAt := time.Now()
	m0 := &pulsar.ProducerMessage{Payload: []byte("m0"), Key: "k0"}
	mark(m0, sentAt)
	if _, err := send(p, m0); err != nil {
		return nil, err
	}
	for _, pl := range []string{"m1", "m2"} {
		if _, err := send(p, &pulsar.ProducerMessage{Payload: []byte(pl)}); err != nil {
			return nil, err
		}
	}
	var order []string
	var m0NotBefore bool
	for i := 0; i < 3; i++ {
		m, err := mustRecv(cons, "message")
		if err != nil {
			return nil, err
		}
		order = append(order, string(m.Payload()))
		if string(m.Payload()) == "m0" {
			m0NotBefore = time.Since(sentAt) >= 900*time.Millisecond
		}
		_ = cons.Ack(m)
	}
	more, err := drain(cons, true)
	if err != nil {
		return nil, err
	}
	return map[string]any{"order": order, "m0_not_before_1s": m0NotBefore, "after": more}, nil
}

// deliverAfterShared: DeliverAfter 2 s on Shared.
func deliverAfterShared(e *env) (any, error) {
	return delayed(e, pulsar.Shared, func(m *pulsar.ProducerMessage, _ time.Time) { m.DeliverAfter = 2 * time.Second })
}

// deliverAfterExclusive: DeliverAfter 2 s on Exclusive (Pulsar delays only on
// Shared and Key_Shared).
func deliverAfterExclusive(e *env) (any, error) {
	return delayed(e, pulsar.Exclusive, func(m *pulsar.ProducerMessage, _ time.Time) { m.DeliverAfter = 2 * time.Second })
}

// deliverAtShared: DeliverAt now + 2 s on Shared.
func deliverAtShared(e *env) (any, error) {
	return delayed(e, pulsar.Shared, func(m *pulsar.ProducerMessage, at time.Time) { m.DeliverAt = at.Add(2 * time.Second) })
}
