package main

import (
	"fmt"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// linearBackoff waits (count+1) seconds before redelivering a nacked message.
type linearBackoff struct{}

func (linearBackoff) Next(redeliveryCount uint32) time.Duration {
	return time.Duration(redeliveryCount+1) * time.Second
}

// nackTimes nacks m0 `nacks` times on Shared and records, per delivery, its
// redelivery count and whether it came no earlier than `floor[i]` after the nack.
// The client trims nack deadlines to 256 ms, so the floors are 0.7 of the delay.
func nackTimes(e *env, opts pulsar.ConsumerOptions, nacks int, floors []time.Duration) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	opts.Topic, opts.SubscriptionName, opts.Type = e.topic(), "sub", pulsar.Shared
	opts.SubscriptionInitialPosition = pulsar.SubscriptionPositionEarliest
	cons, err := c.Subscribe(opts)
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	p, err := producer(c, e.topic())
	if err != nil {
		return nil, err
	}
	defer p.Close()
	if _, err := send(p, &pulsar.ProducerMessage{Payload: []byte("m0"), Key: "k0"}); err != nil {
		return nil, err
	}
	var counts []uint32
	var notBefore []bool
	var nackedAt time.Time
	for i := 0; i <= nacks; i++ {
		m, err := mustRecv(cons, fmt.Sprintf("delivery %d", i))
		if err != nil {
			return nil, err
		}
		counts = append(counts, m.RedeliveryCount())
		if i > 0 {
			notBefore = append(notBefore, time.Since(nackedAt) >= floors[i-1]*7/10)
		}
		if i < nacks {
			nackedAt = time.Now()
			cons.Nack(m)
		} else {
			_ = cons.Ack(m)
		}
	}
	more, err := drain(cons, true)
	if err != nil {
		return nil, err
	}
	return map[string]any{"redelivery_counts": counts, "not_before_backoff": notBefore, "after": more}, nil
}

// nackBackoffCustom: a NackBackoffPolicy of 1 s, 2 s.
func nackBackoffCustom(e *env) (any, error) {
	return nackTimes(e, pulsar.ConsumerOptions{NackBackoffPolicy: linearBackoff{}}, 2,
		[]time.Duration{time.Second, 2 * time.Second})
}

// nackBackoffDefault: the client's default backoff (1 s << count): 1 s, 2 s.
func nackBackoffDefault(e *env) (any, error) {
	return nackTimes(e, pulsar.ConsumerOptions{EnableDefaultNackBackoffPolicy: true}, 2,
		[]time.Duration{time.Second, 2 * time.Second})
}

// nackRedeliveryDelay: a fixed NackRedeliveryDelay of 1 s, nacked twice.
func nackRedeliveryDelay(e *env) (any, error) {
	return nackTimes(e, pulsar.ConsumerOptions{NackRedeliveryDelay: time.Second}, 2,
		[]time.Duration{time.Second, time.Second})
}
