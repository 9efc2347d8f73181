package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// letterboxScenarios run against letterbox only (they use its extensions): --only runs
// them, --list does not name them, so the differential harness never runs them on Pulsar.
func letterboxScenarios() []scenario {
	return []scenario{
		{"failure_events", failureEvents},
	}
}

// failureEvents: the namespace opts in to failure events; a Go consumer on the events
// topic sees the events of one message nacked with a reason (announced through the
// admin API), dead-lettered after its second nack, then redriven: nack, dead-letter,
// redrive, in that order, each naming the topic, the subscription and the reason (the second
// nack is an event of its own when the client asks for the redelivery that then dead-letters).
func failureEvents(e *env) (any, error) {
	ns := strings.Join(strings.Split(strings.TrimPrefix(e.prefix, "persistent://"), "/")[:2], "/")
	if st, err := e.adminSend(http.MethodPost, "/admin/v2/namespaces/"+ns+"/letterbox/failureEvents",
		`{"enabled": true}`); err != nil || st != http.StatusNoContent {
		return nil, fmt.Errorf("enable failure events: status %d, %v", st, err)
	}
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	watch, err := c.Subscribe(pulsar.ConsumerOptions{
		Topic: "persistent://" + ns + "/__letterbox_failure_events", SubscriptionName: "watch-" + e.name,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionLatest,
	})
	if err != nil {
		return nil, err
	}
	defer watch.Close()
	topic := e.topic()
	cons, err := c.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "S", Type: pulsar.Shared, NackRedeliveryDelay: 100 * time.Millisecond,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		Properties:                  map[string]string{"letterbox.dlq.max_redeliveries": "1"},
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
	for attempt := 1; attempt <= 2; attempt++ {
		m, err := mustRecv(cons, fmt.Sprintf("delivery %d", attempt))
		if err != nil {
			return nil, err
		}
		id := fmt.Sprintf("%d:%d", m.ID().LedgerID(), m.ID().EntryID())
		body := fmt.Sprintf(`{"ending": "nack", "reason": "db down (attempt %d)"}`, attempt)
		if st, err := e.adminSend(http.MethodPost, "/admin/v2"+restPath(topic)+"/subscription/S/letterbox/attempts/"+id, body); err != nil || st != 200 {
			return nil, fmt.Errorf("announce the nack: status %d, %v", st, err)
		}
		cons.Nack(m)
	}
	dlq := "/admin/v2" + restPath(topic+"-S-DLQ") + "/letterbox/deadLetters"
	deadline := time.Now().Add(recvWait)
	for {
		st, body, err := e.adminGet(dlq)
		if err == nil && st == 200 && strings.Contains(body, "messageId") {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no dead letter in %s after %s", topic+"-S-DLQ", recvWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st, err := e.adminSend(http.MethodPost, "/admin/v2"+restPath(topic+"-S-DLQ")+"/letterbox/redrive", `{}`); err != nil || st != 200 {
		return nil, fmt.Errorf("redrive: status %d, %v", st, err)
	}
	var events []map[string]any
	for len(events) < 6 && (len(events) == 0 || events[len(events)-1]["type"] != "redrive") {
		m, err := mustRecv(watch, fmt.Sprintf("failure event %d", len(events)+1))
		if err != nil {
			return nil, err
		}
		_ = watch.Ack(m)
		var ev map[string]any
		if err := json.Unmarshal(m.Payload(), &ev); err != nil {
			return nil, fmt.Errorf("an event that is not JSON: %q", m.Payload())
		}
		if ev["topic"] != topic {
			continue // another scenario's
		}
		events = append(events, map[string]any{
			"type": ev["type"], "topic": e.norm(fmt.Sprint(ev["topic"])), "subscription": ev["subscription"],
			"reason": ev["reason"],
		})
	}
	return events, nil
}

// adminSend sends a request with a JSON body to the admin API; the status.
func (e *env) adminSend(method, path, body string) (int, error) {
	req, err := http.NewRequest(method, e.adminURL+path, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: recvWait}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// adminGet reads an admin API path: the status and the body.
func (e *env) adminGet(path string) (int, string, error) {
	resp, err := (&http.Client{Timeout: recvWait}).Get(e.adminURL + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data), err
}
