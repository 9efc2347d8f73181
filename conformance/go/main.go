// Command letterbox-conformance-go runs scenarios written with the official Go
// client (github.com/apache/pulsar-client-go) against one broker and prints one
// JSON line per scenario on stdout, as conformance/README.md specifies.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

// scenario is one named run; it returns a comparable record or an unexpected error.
type scenario struct {
	name string
	run  func(e *env) (any, error)
}

// scenarioTimeout bounds a whole scenario; the scenarios bound their own waits
// well below it, so this only catches a hang inside the client.
const scenarioTimeout = 45 * time.Second

func allScenarios() []scenario {
	return []scenario{
		{"dlq_nack_shared", dlqNackShared},
		{"dlq_nack_exclusive", dlqNackExclusive},
		{"dlq_nack_key_shared", dlqNackKeyShared},
		{"dlq_default_name", dlqDefaultName},
		{"retry_reconsume_later", retryReconsumeLater},
		{"retry_custom_properties", retryCustomProperties},
		{"retry_then_dlq", retryThenDLQ},
		{"nack_backoff_custom", nackBackoffCustom},
		{"nack_backoff_default", nackBackoffDefault},
		{"nack_redelivery_delay", nackRedeliveryDelay},
		{"nack_exclusive_count", nackExclusiveCount},
		{"count_across_reconnect", countAcrossReconnect},
		{"batch_nack_one", batchNackOne},
		{"batch_dlq_one", batchDLQOne},
		{"key_shared_order", keySharedOrder},
		{"deliver_after_shared", deliverAfterShared},
		{"deliver_at_shared", deliverAtShared},
		{"deliver_after_exclusive", deliverAfterExclusive},
		{"ack_cumulative_exclusive", ackCumulativeExclusive},
		{"ack_cumulative_shared_refused", ackCumulativeSharedRefused},
		{"exclusive_second_refused", exclusiveSecondRefused},
		{"failover_active_consumer", failoverActiveConsumer},
		{"reader_earliest_has_next", readerEarliestHasNext},
		{"reader_latest", readerLatest},
		{"seek_by_id", seekByID},
		{"seek_by_time", seekByTime},
		{"partitioned_keys", partitionedKeys},
		{"ack_with_response", ackWithResponse},
		{"producer_exclusive_access", producerExclusiveAccess},
		{"topics_pattern", topicsPattern},
		{"json_schema", jsonSchema},
		{"zero_queue", zeroQueue},
		{"non_persistent", nonPersistent},
		{"chunked_message", chunkedMessage},
		{"message_too_big", messageTooBig},
		{"transaction_unsupported", transactionUnsupported},
	}
}

func main() {
	serviceURL := flag.String("service-url", "", "pulsar://host:port of the broker")
	adminURL := flag.String("admin-url", "", "http://host:port of the admin API")
	prefix := flag.String("prefix", "", "topic prefix, e.g. persistent://public/default/conf-go-1a2b")
	only := flag.String("only", "", "comma-separated scenario names to run")
	list := flag.Bool("list", false, "print the scenario names and exit")
	flag.Parse()

	all := allScenarios()
	if *list {
		for _, s := range all {
			fmt.Println(s.name)
		}
		return
	}
	if *serviceURL == "" || *adminURL == "" || *prefix == "" {
		fmt.Fprintln(os.Stderr, "usage: --service-url URL --admin-url URL --prefix PREFIX [--only NAMES] | --list")
		os.Exit(2)
	}
	selected := all
	if *only != "" {
		all = append(all, letterboxScenarios()...) // letterbox's own: run when named, never listed
		want := map[string]bool{}
		for _, n := range strings.Split(*only, ",") {
			want[strings.TrimSpace(n)] = true
		}
		selected = nil
		for _, s := range all {
			if want[s.name] {
				selected = append(selected, s)
				delete(want, s.name)
			}
		}
		if len(want) > 0 {
			fmt.Fprintf(os.Stderr, "unknown scenario(s): %v\n", keysOf(want))
			os.Exit(2)
		}
	}

	out := json.NewEncoder(os.Stdout)
	out.SetEscapeHTML(false)
	for _, s := range selected {
		e := &env{serviceURL: *serviceURL, adminURL: strings.TrimRight(*adminURL, "/"), prefix: *prefix, name: s.name}
		line := runOne(s, e)
		if err := out.Encode(line); err != nil {
			fmt.Fprintf(os.Stderr, "cannot encode the line of %s: %v\n", s.name, err)
			os.Exit(1)
		}
	}
}

type line struct {
	Scenario string `json:"scenario"`
	Record   any    `json:"record,omitempty"`
	Error    string `json:"error,omitempty"`
}

// runOne runs a scenario in its own goroutine so that a client call that never
// returns costs scenarioTimeout, not the whole program.
func runOne(s scenario, e *env) line {
	type result struct {
		record any
		err    error
	}
	done := make(chan result, 1)
	start := time.Now()
	fmt.Fprintf(os.Stderr, "[conformance-go] %s: start\n", s.name)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- result{err: fmt.Errorf("panic: %v", r)}
			}
		}()
		rec, err := s.run(e)
		done <- result{rec, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-time.After(scenarioTimeout):
		res.err = fmt.Errorf("scenario did not finish within %s", scenarioTimeout)
	}
	fmt.Fprintf(os.Stderr, "[conformance-go] %s: done in %s (err=%v)\n", s.name, time.Since(start).Round(time.Millisecond), res.err)
	if res.err != nil {
		return line{Scenario: s.name, Error: errorLine(res.err)}
	}
	if res.record == nil {
		res.record = map[string]any{}
	}
	return line{Scenario: s.name, Record: res.record}
}

func keysOf(m map[string]bool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
