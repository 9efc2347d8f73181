package main

import (
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// retryConsumer subscribes with RetryEnable on Shared: the client also
// subscribes to the retry topic <topic>-sub-RETRY.
func retryConsumer(c pulsar.Client, topic string, maxDeliveries uint32) (pulsar.Consumer, error) {
	return c.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "sub", Type: pulsar.Shared, RetryEnable: true,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		DLQ:                         &pulsar.DLQPolicy{MaxDeliveries: maxDeliveries},
	})
}

func sendKeyed(c pulsar.Client, topic string) error {
	p, err := producer(c, topic)
	if err != nil {
		return err
	}
	defer p.Close()
	_, err = send(p, &pulsar.ProducerMessage{Payload: []byte("m0"), Key: "k0", EventTime: eventTime,
		Properties: map[string]string{"app": "a0"}})
	return err
}

// retryReconsumeLater: ReconsumeLater(msg, 1s) puts m0 on the retry topic with
// REAL_TOPIC, ORIGIN_MESSAGE_ID, RECONSUMETIMES and DELAY_TIME, its key and
// properties kept, and it is not delivered again before 1 s (a 3 s delay: Pulsar's
// delayed delivery is not strict and may deliver up to one 1 s tick early).
func retryReconsumeLater(e *env) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	cons, err := retryConsumer(c, e.topic(), 3)
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	if err := sendKeyed(c, e.topic()); err != nil {
		return nil, err
	}
	m, err := mustRecv(cons, "m0")
	if err != nil {
		return nil, err
	}
	first := e.rec(m)
	at := time.Now()
	cons.ReconsumeLater(m, 3*time.Second)
	r, err := mustRecv(cons, "m0 from the retry topic")
	if err != nil {
		return nil, err
	}
	notBefore := time.Since(at) >= time.Second
	_ = cons.Ack(r)
	more, err := drain(cons, true)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"first":                 first,
		"retried":               e.rec(r),
		"retried_not_before_1s": notBefore,
		"after":                 more,
	}, nil
}

// retryCustomProperties: ReconsumeLaterWithCustomProperties twice: the custom
// properties ride along and RECONSUMETIMES counts 1, 2.
func retryCustomProperties(e *env) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	cons, err := retryConsumer(c, e.topic(), 5)
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	if err := sendKeyed(c, e.topic()); err != nil {
		return nil, err
	}
	m, err := mustRecv(cons, "m0")
	if err != nil {
		return nil, err
	}
	var seen []msgRec
	for i, reason := range []string{"first", "second"} {
		cons.ReconsumeLaterWithCustomProperties(m, map[string]string{"reason": reason, "try": reason}, time.Second)
		if m, err = mustRecv(cons, "retry "+reason); err != nil {
			return nil, err
		}
		seen = append(seen, e.rec(m))
		_ = i
	}
	_ = cons.Ack(m)
	more, err := drain(cons, true)
	if err != nil {
		return nil, err
	}
	return map[string]any{"retries": seen, "after": more}, nil
}

// retryThenDLQ: MaxDeliveries 2 with RetryEnable: two reconsumes go to the
// retry topic, the third goes to <topic>-sub-DLQ with the retry properties.
func retryThenDLQ(e *env) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	watch, err := c.Subscribe(pulsar.ConsumerOptions{
		Topic: e.topic() + "-sub-DLQ", SubscriptionName: "watch", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		return nil, err
	}
	defer watch.Close()
	cons, err := retryConsumer(c, e.topic(), 2)
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	if err := sendKeyed(c, e.topic()); err != nil {
		return nil, err
	}
	var seen []msgRec
	for i := 0; i < 3; i++ {
		m, err := mustRecv(cons, "m0")
		if err != nil {
			return nil, err
		}
		seen = append(seen, e.rec(m))
		cons.ReconsumeLater(m, 0)
	}
	dm, err := mustRecv(watch, "the dead letter")
	if err != nil {
		return nil, err
	}
	_ = watch.Ack(dm)
	more, err := drain(cons, true)
	if err != nil {
		return nil, err
	}
	return map[string]any{"deliveries": seen, "dead_letter": e.rec(dm), "after": more}, nil
}
