package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// keySharedOrder: two consumers on one Key_Shared subscription, 24 messages over
// 4 keys. Recorded: per key the order received (whichever consumer got it), and
// whether every key stayed with one consumer.
func keySharedOrder(e *env) (any, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var conss []pulsar.Consumer
	for _, name := range []string{"ks-a", "ks-b"} {
		cons, err := c.Subscribe(pulsar.ConsumerOptions{
			Topic: e.topic(), SubscriptionName: "sub", Type: pulsar.KeyShared, Name: name,
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		})
		if err != nil {
			return nil, err
		}
		defer cons.Close()
		conss = append(conss, cons)
	}
	p, err := producer(c, e.topic())
	if err != nil {
		return nil, err
	}
	defer p.Close()
	const total = 24
	for i := 0; i < total; i++ {
		if _, err := send(p, &pulsar.ProducerMessage{
			Payload: []byte(fmt.Sprintf("m%d", i)), Key: fmt.Sprintf("k%d", i%4)}); err != nil {
			return nil, err
		}
	}
	var mu sync.Mutex
	perKey := map[string][]string{}
	owners := map[string]map[string]bool{}
	count := 0
	var wg sync.WaitGroup
	deadline := time.Now().Add(15 * time.Second)
	for _, cons := range conss {
		wg.Add(1)
		go func(cons pulsar.Consumer) {
			defer wg.Done()
			for time.Now().Before(deadline) {
				m, err := recv(cons, quietWait)
				if err != nil {
					mu.Lock()
					done := count >= total
					mu.Unlock()
					if done || err != errNoMessage {
						return
					}
					continue
				}
				_ = cons.Ack(m)
				mu.Lock()
				perKey[m.Key()] = append(perKey[m.Key()], string(m.Payload()))
				if owners[m.Key()] == nil {
					owners[m.Key()] = map[string]bool{}
				}
				owners[m.Key()][cons.Name()] = true
				count++
				mu.Unlock()
			}
		}(cons)
	}
	wg.Wait()
	oneOwner := true
	for _, o := range owners {
		if len(o) != 1 {
			oneOwner = false
		}
	}
	return map[string]any{
		"received":              count,
		"per_key":               perKey,
		"each_key_one_consumer": oneOwner,
	}, nil
}
