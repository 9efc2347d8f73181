package main

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// ackWithResponse: individual acks with AckWithResponse on Shared: what each
// ack returns (a broker that never answers makes it "Hung" or a timeout), then
// what a new consumer still gets.
func ackWithResponse(e *env) (any, error) {
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
	if _, err := sendN(p, 2); err != nil {
		cons.Close()
		return nil, err
	}
	var ackErrs []string
	for i := 0; i < 2; i++ {
		m, err := mustRecv(cons, fmt.Sprintf("m%d", i))
		if err != nil {
			cons.Close()
			return nil, err
		}
		_, ackErr := within(15*time.Second, func() (struct{}, error) { return struct{}{}, cons.Ack(m) })
		ackErrs = append(ackErrs, errName(ackErr))
	}
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
	return map[string]any{"ack_errors": ackErrs, "after_reattach": left}, nil
}

// producerExclusiveAccess: an Exclusive-access producer keeps out a second
// Exclusive one and a Shared one; once it closes, a new Exclusive one gets in.
func producerExclusiveAccess(e *env) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	create := func(mode pulsar.ProducerAccessMode) (pulsar.Producer, error) {
		return within(20*time.Second, func() (pulsar.Producer, error) {
			return c.CreateProducer(pulsar.ProducerOptions{Topic: e.topic(), ProducerAccessMode: mode,
				DisableBatching: true, SendTimeout: 10 * time.Second})
		})
	}
	first, err := create(pulsar.ProducerAccessModeExclusive)
	if err != nil {
		return nil, err
	}
	rec := map[string]any{}
	for name, mode := range map[string]pulsar.ProducerAccessMode{
		"second_exclusive": pulsar.ProducerAccessModeExclusive, "second_shared": pulsar.ProducerAccessModeShared,
	} {
		p, err := create(mode)
		if err == nil {
			p.Close()
		}
		rec[name+"_error"] = errName(err)
	}
	first.Close()
	again, err := create(pulsar.ProducerAccessModeExclusive)
	if err == nil {
		again.Close()
	}
	rec["exclusive_after_close_error"] = errName(err)
	return rec, nil
}

// topicsPattern: a TopicsPattern consumer over PREFIX-topics_pattern-.* picks
// up both existing topics and reads their messages.
func topicsPattern(e *env) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	for _, s := range []string{"a", "b"} {
		p, err := producer(c, e.topic(s))
		if err != nil {
			return nil, err
		}
		_, err = send(p, &pulsar.ProducerMessage{Payload: []byte("m-" + s)})
		p.Close()
		if err != nil {
			return nil, err
		}
	}
	cons, err := c.Subscribe(pulsar.ConsumerOptions{
		TopicsPattern: e.topic() + "-.*", SubscriptionName: "sub", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	var got []string
	for i := 0; i < 2; i++ {
		m, err := mustRecv(cons, "a message of the pattern")
		if err != nil {
			return nil, err
		}
		_ = cons.Ack(m)
		got = append(got, string(m.Payload())+" from "+e.norm(m.Topic()))
	}
	sort.Strings(got)
	return map[string]any{"received": got}, nil
}

type jsonRec struct {
	N int    `json:"n"`
	S string `json:"s"`
}

const jsonRecSchema = `{"type":"record","name":"Rec","namespace":"conformance",` +
	`"fields":[{"name":"n","type":"int"},{"name":"s","type":"string"}]}`

// jsonSchema: a JSON-schema producer and consumer round-trip a value; a
// consumer with a STRING schema on that topic is refused (or not).
func jsonSchema(e *env) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	schema := pulsar.NewJSONSchema(jsonRecSchema, nil)
	cons, err := c.Subscribe(pulsar.ConsumerOptions{
		Topic: e.topic(), SubscriptionName: "sub", Type: pulsar.Shared, Schema: schema,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: e.topic(), Schema: schema, DisableBatching: true})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	if _, err := send(p, &pulsar.ProducerMessage{Value: &jsonRec{N: 7, S: "seven"}}); err != nil {
		return nil, err
	}
	m, err := mustRecv(cons, "the JSON value")
	if err != nil {
		return nil, err
	}
	_ = cons.Ack(m)
	var v jsonRec
	decodeErr := m.GetSchemaValue(&v)
	other, subErr := within(20*time.Second, func() (pulsar.Consumer, error) {
		return c.Subscribe(pulsar.ConsumerOptions{
			Topic: e.topic(), SubscriptionName: "other", Type: pulsar.Shared, Schema: pulsar.NewStringSchema(nil),
		})
	})
	if subErr == nil {
		other.Close()
	}
	return map[string]any{
		"value": v, "decode_error": errName(decodeErr), "string_consumer_error": errName(subErr),
	}, nil
}

// zeroQueue: a zero-queue consumer on Shared receives m0..m2 one at a time.
func zeroQueue(e *env) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{
		Topic: e.topic(), SubscriptionName: "sub", Type: pulsar.Shared, EnableZeroQueueConsumer: true,
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
	if _, err := sendN(p, 3); err != nil {
		return nil, err
	}
	got, err := drain(cons, true)
	if err != nil {
		return nil, err
	}
	return map[string]any{"received": got}, nil
}

// nonPersistent: a consumer on a non-persistent topic gets what is published
// while it is connected.
func nonPersistent(e *env) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	topic := strings.Replace(e.topic(), "persistent://", "non-persistent://", 1)
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "sub", Type: pulsar.Shared})
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	p, err := producer(c, topic)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	// in lockstep: each message is sent once the one before was received, so what a broker
	// delivers does not depend on how a burst falls (Apache Pulsar's answer with this
	// client is pinned in tests/conformance/deliberate.py)
	got := []string{}
	for i := 0; i < 3; i++ {
		if _, err := send(p, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("m%d", i))}); err != nil {
			return nil, fmt.Errorf("send m%d: %w", i, err)
		}
		m, err := recv(cons, recvWait)
		if errors.Is(err, errNoMessage) {
			break
		}
		if err != nil {
			return nil, err
		}
		got = append(got, string(m.Payload()))
		_ = cons.Ack(m)
	}
	rest, err := drain(cons, true)
	if err != nil {
		return nil, err
	}
	return map[string]any{"received": append(got, rest...)}, nil
}
