package main

import (
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// ackCumulativeExclusive: on Exclusive, AckCumulative(m2) acks m0..m2; after a
// new consumer attaches, m3 and m4 are what is left.
func ackCumulativeExclusive(e *env) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	opts := pulsar.ConsumerOptions{
		Topic: e.topic(), SubscriptionName: "sub", Type: pulsar.Exclusive,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		AckGroupingOptions:          &pulsar.AckGroupingOptions{MaxSize: 1},
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
	if _, err := sendN(p, 5); err != nil {
		cons.Close()
		return nil, err
	}
	var first []string
	var third pulsar.Message
	for i := 0; i < 5; i++ {
		m, err := mustRecv(cons, "message")
		if err != nil {
			cons.Close()
			return nil, err
		}
		first = append(first, string(m.Payload()))
		if i == 2 {
			third = m
		}
	}
	ackErr := cons.AckCumulative(third)
	time.Sleep(300 * time.Millisecond) // let the ack leave before the consumer closes
	cons.Close()
	cons2, err := c.Subscribe(opts)
	if err != nil {
		return nil, err
	}
	defer cons2.Close()
	left, err := drain(cons2, true)
	if err != nil {
		return nil, err
	}
	return map[string]any{"first": first, "ack_error": errName(ackErr), "after_reattach": left}, nil
}

// ackCumulativeSharedRefused: a cumulative ack on Shared, sent with a response
// requested: the broker's answer, then what a new consumer gets.
func ackCumulativeSharedRefused(e *env) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	opts := pulsar.ConsumerOptions{
		Topic: e.topic(), SubscriptionName: "sub", Type: pulsar.Shared, AckWithResponse: true,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
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
	if _, err := sendN(p, 3); err != nil {
		cons.Close()
		return nil, err
	}
	var last pulsar.Message
	for i := 0; i < 3; i++ {
		if last, err = mustRecv(cons, "message"); err != nil {
			cons.Close()
			return nil, err
		}
	}
	_, ackErr := within(15*time.Second, func() (struct{}, error) { return struct{}{}, cons.AckCumulative(last) })
	cons.Close()
	cons2, err := c.Subscribe(opts)
	if err != nil {
		return nil, err
	}
	defer cons2.Close()
	left, err := drain(cons2, true)
	if err != nil {
		return nil, err
	}
	return map[string]any{"ack_error": errName(ackErr), "after_reattach": left}, nil
}

// exclusiveSecondRefused: a second consumer on an Exclusive subscription is
// refused; the first keeps consuming.
func exclusiveSecondRefused(e *env) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	opts := pulsar.ConsumerOptions{
		Topic: e.topic(), SubscriptionName: "sub", Type: pulsar.Exclusive,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	}
	cons, err := c.Subscribe(opts)
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	second, subErr := within(20*time.Second, func() (pulsar.Consumer, error) { return c.Subscribe(opts) })
	if subErr == nil {
		second.Close()
	}
	p, err := producer(c, e.topic())
	if err != nil {
		return nil, err
	}
	defer p.Close()
	if _, err := sendN(p, 2); err != nil {
		return nil, err
	}
	got, err := drain(cons, true)
	if err != nil {
		return nil, err
	}
	return map[string]any{"second_error": errName(subErr), "first_gets": got}, nil
}

// failoverActiveConsumer: two Failover consumers on a non-partitioned topic:
// one of them gets every message (which one is the broker's choice, and Pulsar's
// is not stable from run to run, so it is not recorded), and when it closes the
// other takes over.
func failoverActiveConsumer(e *env) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	byName := map[string]pulsar.Consumer{}
	for _, name := range []string{"fo-a", "fo-b"} {
		cons, err := c.Subscribe(pulsar.ConsumerOptions{
			Topic: e.topic(), SubscriptionName: "sub", Type: pulsar.Failover, Name: name,
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		})
		if err != nil {
			return nil, err
		}
		defer cons.Close()
		byName[name] = cons
	}
	p, err := producer(c, e.topic())
	if err != nil {
		return nil, err
	}
	defer p.Close()
	if _, err := sendN(p, 3); err != nil {
		return nil, err
	}
	got := map[string][]string{}
	for _, name := range []string{"fo-a", "fo-b"} {
		if got[name], err = drain(byName[name], true); err != nil {
			return nil, err
		}
	}
	active, standby := "fo-a", "fo-b"
	if len(got["fo-a"]) == 0 {
		active, standby = standby, active
	}
	byName[active].Close()
	for _, pl := range []string{"m3", "m4"} {
		if _, err := send(p, &pulsar.ProducerMessage{Payload: []byte(pl)}); err != nil {
			return nil, err
		}
	}
	after, err := drain(byName[standby], true)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"one_consumer_got_all": len(got[standby]) == 0,
		"active_got":           got[active],
		"after_active_closed":  after,
	}, nil
}
