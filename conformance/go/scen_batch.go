package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// sendBatch publishes m0..m2 (keys k0..k2) as one batch and reports whether
// they share one entry.
func sendBatch(c pulsar.Client, topic string) (bool, error) {
	p, err := c.CreateProducer(pulsar.ProducerOptions{
		Topic: topic, BatchingMaxMessages: 3, BatchingMaxPublishDelay: 500 * time.Millisecond,
		SendTimeout: 10 * time.Second,
	})
	if err != nil {
		return false, err
	}
	defer p.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	ids := make([]pulsar.MessageID, 3)
	var sendErr error
	for i := 0; i < 3; i++ {
		wg.Add(1)
		p.SendAsync(context.Background(), &pulsar.ProducerMessage{
			Payload: []byte(fmt.Sprintf("m%d", i)), Key: fmt.Sprintf("k%d", i),
			Properties: map[string]string{"i": fmt.Sprint(i)},
		}, func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				sendErr = err
			} else {
				ids[id.BatchIdx()] = id
			}
			wg.Done()
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), recvWait)
	defer cancel()
	if err := p.FlushWithCtx(ctx); err != nil {
		return false, err
	}
	if _, err := within(recvWait, func() (struct{}, error) { wg.Wait(); return struct{}{}, nil }); err != nil {
		return false, err
	}
	if sendErr != nil {
		return false, sendErr
	}
	same := true
	for _, id := range ids[1:] {
		if id == nil || ids[0] == nil || id.LedgerID() != ids[0].LedgerID() || id.EntryID() != ids[0].EntryID() {
			same = false
		}
	}
	return same, nil
}

// batchConsumer is a Shared consumer with batch index acknowledgment.
func batchConsumer(c pulsar.Client, topic string, dlq *pulsar.DLQPolicy) (pulsar.Consumer, error) {
	return c.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "sub", Type: pulsar.Shared,
		SubscriptionInitialPosition:    pulsar.SubscriptionPositionEarliest,
		EnableBatchIndexAcknowledgment: true, NackRedeliveryDelay: time.Second, DLQ: dlq,
	})
}

// receiveBatch receives the three messages, acks m0 and m2 and nacks m1.
func receiveBatch(cons pulsar.Consumer) ([]string, error) {
	var got []string
	for i := 0; i < 3; i++ {
		m, err := mustRecv(cons, fmt.Sprintf("batch message %d", i))
		if err != nil {
			return nil, err
		}
		got = append(got, string(m.Payload()))
		if string(m.Payload()) == "m1" {
			cons.Nack(m)
		} else {
			_ = cons.Ack(m)
		}
	}
	return got, nil
}

// batchNackOne: one message of a batch nacked, its siblings acked: only it
// comes again (batch index acknowledgment on the consumer and, for Pulsar, the
// broker).
func batchNackOne(e *env) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	cons, err := batchConsumer(c, e.topic(), nil)
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	same, err := sendBatch(c, e.topic())
	if err != nil {
		return nil, err
	}
	first, err := receiveBatch(cons)
	if err != nil {
		return nil, err
	}
	var again []msgRec
	for len(again) < 10 {
		m, err := recv(cons, 3*time.Second)
		if err == errNoMessage {
			break
		}
		if err != nil {
			return nil, err
		}
		again = append(again, e.rec(m))
		_ = cons.Ack(m)
	}
	return map[string]any{"one_entry": same, "first": first, "redelivered": again}, nil
}

// batchDLQOne: the nacked message of a batch goes to the DLQ (MaxDeliveries 1)
// alone, with its key and properties; its acked siblings do not.
func batchDLQOne(e *env) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	dlqTopic := e.topic("dead")
	watch, err := c.Subscribe(pulsar.ConsumerOptions{
		Topic: dlqTopic, SubscriptionName: "watch", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		return nil, err
	}
	defer watch.Close()
	cons, err := batchConsumer(c, e.topic(), &pulsar.DLQPolicy{MaxDeliveries: 1, DeadLetterTopic: dlqTopic})
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	same, err := sendBatch(c, e.topic())
	if err != nil {
		return nil, err
	}
	first, err := receiveBatch(cons)
	if err != nil {
		return nil, err
	}
	var dead []msgRec
	for len(dead) < 10 {
		m, err := recv(watch, 5*time.Second)
		if err == errNoMessage {
			break
		}
		if err != nil {
			return nil, err
		}
		dead = append(dead, e.rec(m))
		_ = watch.Ack(m)
	}
	more, err := drain(cons, true)
	if err != nil {
		return nil, err
	}
	return map[string]any{"one_entry": same, "first": first, "dead_letters": dead, "source_after": more}, nil
}
