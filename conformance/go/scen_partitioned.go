package main

import (
	"fmt"

	"github.com/apache/pulsar-client-go/pulsar"
)

// partitionedKeys: a 3-partition topic created through the admin API; 12 keyed
// messages over 4 keys; one Shared consumer gets them all, each key from one
// partition, in order.
func partitionedKeys(e *env) (any, error) {
	topic := e.topic("partitioned")
	status, err := e.adminPut("/admin/v2"+restPath(topic)+"/partitions", "3")
	if err != nil {
		return nil, err
	}
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	parts, err := c.TopicPartitions(topic)
	if err != nil {
		return nil, err
	}
	var normParts []string
	for _, t := range parts {
		normParts = append(normParts, e.norm(t))
	}
	cons, err := c.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "sub", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
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
	const total = 12
	for i := 0; i < total; i++ {
		if _, err := send(p, &pulsar.ProducerMessage{
			Payload: []byte(fmt.Sprintf("m%d", i)), Key: fmt.Sprintf("k%d", i%4)}); err != nil {
			return nil, err
		}
	}
	perKey := map[string][]string{}
	partitionOf := map[string]map[string]bool{}
	for i := 0; i < total; i++ {
		m, err := mustRecv(cons, fmt.Sprintf("message %d", i))
		if err != nil {
			return nil, err
		}
		_ = cons.Ack(m)
		perKey[m.Key()] = append(perKey[m.Key()], string(m.Payload()))
		if partitionOf[m.Key()] == nil {
			partitionOf[m.Key()] = map[string]bool{}
		}
		partitionOf[m.Key()][e.norm(m.Topic())] = true
	}
	keyPartition := map[string]any{}
	for k, ps := range partitionOf {
		if len(ps) == 1 {
			keyPartition[k] = sortedKeys(ps)[0]
		} else {
			keyPartition[k] = sortedKeys(ps)
		}
	}
	more, err := drain(cons, true)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"create_status": status, "partitions": normParts, "per_key": perKey,
		"key_partition": keyPartition, "after": more,
	}, nil
}
