package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// dlqNackShared: DLQPolicy{MaxDeliveries 2, DeadLetterTopic, RetryLetterTopic,
// InitialSubscriptionName} on Shared. m0 is nacked on every delivery and ends
// in the dead letter topic with its key and properties; m1 is acked. The DLQ is
// read through the initial subscription, from Latest, so the message is there
// only if that subscription was created with the DLQ producer.
func dlqNackShared(e *env) (any, error) { return dlqNack(e, pulsar.Shared) }

// dlqNackKeyShared: the same on Key_Shared.
func dlqNackKeyShared(e *env) (any, error) { return dlqNack(e, pulsar.KeyShared) }

func dlqNack(e *env, subType pulsar.SubscriptionType) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	topic, dlqTopic := e.topic(), e.topic("dead")
	cons, err := c.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "sub", Type: subType,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		NackRedeliveryDelay:         500 * time.Millisecond,
		DLQ: &pulsar.DLQPolicy{
			MaxDeliveries: 2, DeadLetterTopic: dlqTopic, RetryLetterTopic: e.topic("retry"),
			InitialSubscriptionName: "dlq-init",
		},
	})
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	p, err := producer(c, topic)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	if _, err := send(p, &pulsar.ProducerMessage{Payload: []byte("m0"), Key: "k0", EventTime: eventTime,
		Properties: map[string]string{"app": "a0", "trace": "t0"}}); err != nil {
		return nil, err
	}
	if _, err := send(p, &pulsar.ProducerMessage{Payload: []byte("m1"), Key: "k1"}); err != nil {
		return nil, err
	}
	deliveries := map[string][]uint32{}
	for n := 0; n < 3; n++ { // m0 twice (counts 0, 1), m1 once; the third m0 goes to the DLQ
		m, err := mustRecv(cons, fmt.Sprintf("delivery %d", n))
		if err != nil {
			return nil, err
		}
		pl := string(m.Payload())
		deliveries[pl] = append(deliveries[pl], m.RedeliveryCount())
		if pl == "m0" {
			cons.Nack(m)
		} else {
			_ = cons.Ack(m)
		}
	}
	dlqCons, err := c.Subscribe(pulsar.ConsumerOptions{
		Topic: dlqTopic, SubscriptionName: "dlq-init", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionLatest,
	})
	if err != nil {
		return nil, err
	}
	defer dlqCons.Close()
	dm, err := mustRecv(dlqCons, "the dead letter")
	if err != nil {
		return nil, err
	}
	_ = dlqCons.Ack(dm)
	more, err := drain(cons, true)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"deliveries":       deliveries,
		"dead_letter":      e.rec(dm),
		"source_after_dlq": more,
	}, nil
}

// dlqDefaultName: RetryEnable with a DLQPolicy that names no topics: the dead
// letter topic is <topic>-<subscription>-DLQ. Nothing is read from the retry
// topic; m0 is nacked once (MaxDeliveries 1) and moves.
func dlqDefaultName(e *env) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	topic := e.topic()
	// Watch the default DLQ name before anything can be written to it.
	watch, err := c.Subscribe(pulsar.ConsumerOptions{
		Topic: topic + "-sub-DLQ", SubscriptionName: "watch", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		return nil, err
	}
	defer watch.Close()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "sub", Type: pulsar.Shared, RetryEnable: true,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		NackRedeliveryDelay:         500 * time.Millisecond,
		DLQ:                         &pulsar.DLQPolicy{MaxDeliveries: 1},
	})
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	p, err := producer(c, topic)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	if _, err := send(p, &pulsar.ProducerMessage{Payload: []byte("m0"), Key: "k0", OrderingKey: "ok0",
		Properties: map[string]string{"app": "a0"}}); err != nil {
		return nil, err
	}
	m, err := mustRecv(cons, "m0")
	if err != nil {
		return nil, err
	}
	first := e.rec(m)
	cons.Nack(m)
	dm, err := mustRecv(watch, "the dead letter")
	if err != nil {
		return nil, err
	}
	_ = watch.Ack(dm)
	more, err := drain(cons, true)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"first":            first,
		"dead_letter":      e.rec(dm),
		"source_after_dlq": more,
	}, nil
}

// dlqNackExclusive: DLQPolicy{MaxDeliveries 2} on Exclusive, one message nacked on each of at most
// five deliveries: the counts the application saw and what the dead letter topic holds.
func dlqNackExclusive(e *env) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	topic, dlqTopic := e.topic(), e.topic("dead")
	dlqCons, err := c.Subscribe(pulsar.ConsumerOptions{
		Topic: dlqTopic, SubscriptionName: "dlq-watch", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		return nil, err
	}
	defer dlqCons.Close()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "sub", Type: pulsar.Exclusive,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		NackRedeliveryDelay:         200 * time.Millisecond,
		DLQ:                         &pulsar.DLQPolicy{MaxDeliveries: 2, DeadLetterTopic: dlqTopic},
	})
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	p, err := producer(c, topic)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	if _, err := send(p, &pulsar.ProducerMessage{Payload: []byte("m0")}); err != nil {
		return nil, err
	}
	counts := []uint32{}
	for n := 0; n < 5; n++ {
		m, err := recv(cons, 3*time.Second)
		if errors.Is(err, errNoMessage) {
			break
		}
		if err != nil {
			return nil, err
		}
		counts = append(counts, m.RedeliveryCount())
		cons.Nack(m)
	}
	dead, err := drain(dlqCons, true)
	if err != nil {
		return nil, err
	}
	return map[string]any{"counts": counts, "dead": dead}, nil
}
