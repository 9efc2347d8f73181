package main

import (
	"bytes"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// bigPayload is n bytes of a repeating pattern, so a reassembly error shows.
func bigPayload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%23)
	}
	return b
}

// chunkedMessage: a 200 KB message sent in 64 KB chunks (batching off) is
// reassembled for the consumer, with its key.
func chunkedMessage(e *env) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{
		Topic: e.topic(), SubscriptionName: "sub", Type: pulsar.Exclusive,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{
		Topic: e.topic(), DisableBatching: true, EnableChunking: true, ChunkMaxMessageSize: 64 * 1024,
		SendTimeout: 10 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	big := bigPayload(200 * 1024)
	if _, err := send(p, &pulsar.ProducerMessage{Payload: big, Key: "big"}); err != nil {
		return nil, err
	}
	if _, err := send(p, &pulsar.ProducerMessage{Payload: []byte("m1")}); err != nil {
		return nil, err
	}
	m, err := mustRecv(cons, "the chunked message")
	if err != nil {
		return nil, err
	}
	_ = cons.Ack(m)
	rec := map[string]any{"size": len(m.Payload()), "intact": bytes.Equal(m.Payload(), big), "key": m.Key()}
	more, err := drain(cons, true)
	if err != nil {
		return nil, err
	}
	rec["after"] = more
	return rec, nil
}

// messageTooBig: a 6 MB message without chunking is refused (the limit is the
// broker's max_message_size, 5 MB on both), and the producer still works.
func messageTooBig(e *env) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{
		Topic: e.topic(), SubscriptionName: "sub", Type: pulsar.Exclusive,
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
	_, bigErr := send(p, &pulsar.ProducerMessage{Payload: bigPayload(6 * 1024 * 1024)})
	_, okErr := send(p, &pulsar.ProducerMessage{Payload: []byte("m1")})
	got, err := drain(cons, true)
	if err != nil {
		return nil, err
	}
	return map[string]any{"big_error": errName(bigErr), "small_error": errName(okErr), "received": got}, nil
}
