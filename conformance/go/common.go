package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/sirupsen/logrus"
)

// recvWait bounds one receive that expects a message; quietWait bounds one that
// expects none (a fact that "nothing more arrives" needs a shorter wait).
const (
	recvWait  = 10 * time.Second
	quietWait = 2 * time.Second
)

// env is what one scenario knows about the broker it runs against.
type env struct {
	serviceURL string
	adminURL   string
	prefix     string
	name       string
}

// topic names the scenario's topic: PREFIX-<scenario>[-suffix...].
func (e *env) topic(suffix ...string) string {
	t := e.prefix + "-" + e.name
	for _, s := range suffix {
		t += "-" + s
	}
	return t
}

var logger = func() plog.Logger {
	l := logrus.New()
	l.SetOutput(os.Stderr)
	l.SetLevel(logrus.WarnLevel)
	if lvl, err := logrus.ParseLevel(os.Getenv("CONFORMANCE_GO_LOG_LEVEL")); err == nil {
		l.SetLevel(lvl) // e.g. debug, to see the client's side of a difference
	}
	return plog.NewLoggerWithLogrus(l)
}()

func (e *env) client(opts ...func(*pulsar.ClientOptions)) (pulsar.Client, error) {
	o := pulsar.ClientOptions{
		URL:               e.serviceURL,
		OperationTimeout:  10 * time.Second,
		ConnectionTimeout: 5 * time.Second,
		Logger:            logger,
	}
	for _, f := range opts {
		f(&o)
	}
	return pulsar.NewClient(o)
}

func producer(c pulsar.Client, topic string) (pulsar.Producer, error) {
	return c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true, SendTimeout: 10 * time.Second})
}

// send publishes one message and waits for its receipt (bounded by SendTimeout).
func send(p pulsar.Producer, m *pulsar.ProducerMessage) (pulsar.MessageID, error) {
	ctx, cancel := context.WithTimeout(context.Background(), recvWait)
	defer cancel()
	return p.Send(ctx, m)
}

// sendN publishes payloads m0..m<n-1>.
func sendN(p pulsar.Producer, n int) ([]pulsar.MessageID, error) {
	var ids []pulsar.MessageID
	for i := 0; i < n; i++ {
		id, err := send(p, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("m%d", i))})
		if err != nil {
			return nil, fmt.Errorf("send m%d: %w", i, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// eventTime is the event time the scenarios set on the messages whose
// components they follow through retry and dead letter topics.
var eventTime = time.UnixMilli(1700000000123)

var errNoMessage = errors.New("no message")

// recv waits at most d for one message; errNoMessage when none came.
func recv(c pulsar.Consumer, d time.Duration) (pulsar.Message, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	m, err := c.Receive(ctx)
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		return nil, errNoMessage
	}
	return m, err
}

// mustRecv is recv for a message the scenario needs: its absence is an error.
func mustRecv(c pulsar.Consumer, what string) (pulsar.Message, error) {
	m, err := recv(c, recvWait)
	if errors.Is(err, errNoMessage) {
		return nil, fmt.Errorf("receive timed out after %s waiting for %s", recvWait, what)
	}
	return m, err
}

// drain receives until quietWait passes with nothing, and returns the payloads.
func drain(c pulsar.Consumer, ack bool) ([]string, error) {
	got := []string{}
	for len(got) < 1000 {
		m, err := recv(c, quietWait)
		if errors.Is(err, errNoMessage) {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		got = append(got, string(m.Payload()))
		if ack {
			_ = c.Ack(m)
		}
	}
	return got, nil
}

// within runs f and gives up after d: a call that never returns is a fact
// ("Hung") rather than a hang of the program.
func within[T any](d time.Duration, f func() (T, error)) (T, error) {
	type res struct {
		v   T
		err error
	}
	ch := make(chan res, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				ch <- res{err: fmt.Errorf("panic: %v", r)}
			}
		}()
		v, err := f()
		ch <- res{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-time.After(d):
		var zero T
		return zero, errHung
	}
}

var errHung = errors.New("call did not return in time")

// msgRec is one received message made comparable.
type msgRec struct {
	Payload     string            `json:"payload"`
	Key         string            `json:"key,omitempty"`
	OrderingKey string            `json:"ordering_key,omitempty"`
	EventTime   int64             `json:"event_time,omitempty"`
	Redelivery  uint32            `json:"redelivery"`
	Topic       string            `json:"topic,omitempty"`
	Props       map[string]string `json:"props,omitempty"`
}

func (e *env) rec(m pulsar.Message) msgRec {
	r := msgRec{
		Payload:     string(m.Payload()),
		Key:         m.Key(),
		OrderingKey: string(m.OrderingKey()),
		Redelivery:  m.RedeliveryCount(),
		Topic:       e.norm(m.Topic()),
	}
	if !m.EventTime().IsZero() {
		r.EventTime = m.EventTime().UnixMilli()
	}
	if len(m.Properties()) > 0 {
		r.Props = map[string]string{}
		for k, v := range m.Properties() {
			r.Props[k] = e.norm(v)
		}
	}
	return r
}

var msgIDPattern = regexp.MustCompile(`^\(?-?\d+:-?\d+(:-?\d+){0,2}\)?$`)

// norm makes a value comparable: the prefix becomes {p}, a message id "<id>".
func (e *env) norm(v string) string {
	if msgIDPattern.MatchString(v) {
		return "<id>"
	}
	v = strings.ReplaceAll(v, e.prefix, "{p}")
	if short := strings.TrimPrefix(e.prefix, "persistent://"); short != e.prefix {
		v = strings.ReplaceAll(v, short, "{p}")
	}
	return v
}

// resultNames are the names of pulsar.Result in declaration order.
var resultNames = []string{
	"Ok", "UnknownError", "InvalidConfiguration", "TimeoutError", "LookupError", "ConnectError",
	"ReadError", "AuthenticationError", "AuthorizationError", "ErrorGettingAuthenticationData",
	"BrokerMetadataError", "BrokerPersistenceError", "ChecksumError", "ConsumerBusy",
	"NotConnectedError", "AlreadyClosedError", "InvalidMessage", "ConsumerNotInitialized",
	"ProducerNotInitialized", "TooManyLookupRequestException", "InvalidTopicName", "InvalidURL",
	"ServiceUnitNotReady", "OperationNotSupported", "ProducerBlockedQuotaExceededError",
	"ProducerBlockedQuotaExceededException", "ProducerQueueIsFull", "MessageTooBig", "TopicNotFound",
	"SubscriptionNotFound", "ConsumerNotFound", "UnsupportedVersionError", "TopicTerminated",
	"CryptoError", "ConsumerClosed", "InvalidBatchBuilderType", "AddToBatchFailed", "SeekFailed",
	"ProducerClosed", "SchemaFailure", "InvalidStatus", "TransactionNoFoundError",
	"ClientMemoryBufferIsFull", "ProducerFenced", "MaxConcurrentOperationsReached",
	"TransactionCoordinatorNotEnabled",
}

var serverErrorPattern = regexp.MustCompile(`(?:server error|ack response error): ([A-Za-z]+)`)

// errName is the comparable name of an expected failure: the Pulsar ServerError
// name when the broker sent one, else the client's Result name, else the Go type.
func errName(err error) string {
	if err == nil {
		return ""
	}
	if m := serverErrorPattern.FindStringSubmatch(err.Error()); m != nil {
		return m[1]
	}
	var pe *pulsar.Error
	if errors.As(err, &pe) {
		if r := int(pe.Result()); r >= 0 && r < len(resultNames) {
			return resultNames[r]
		}
		return fmt.Sprintf("Result(%d)", pe.Result())
	}
	switch {
	case errors.Is(err, pulsar.ErrInvalidAck):
		return "InvalidAck"
	case errors.Is(err, pulsar.ErrTransaction):
		return "TransactionError"
	case errors.Is(err, errHung):
		return "Hung"
	case errors.Is(err, context.DeadlineExceeded):
		return "DeadlineExceeded"
	case strings.Contains(err.Error(), "request timed out"):
		return "RequestTimedOut"
	}
	return fmt.Sprintf("%T", err)
}

// errorLine is the text of a scenario's unexpected failure.
func errorLine(err error) string {
	return fmt.Sprintf("%s: %v", errName(err), err)
}

// adminPut sends a PUT with a JSON body to the admin API and returns the status.
func (e *env) adminPut(path, body string) (int, error) {
	return e.adminSend(http.MethodPut, path, body)
}

// restPath is the admin path of a persistent topic: /persistent/tenant/ns/name.
func restPath(topic string) string {
	return "/" + strings.Replace(topic, "://", "/", 1)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
