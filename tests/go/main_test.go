// sqsim's Go client suite: the SQS behaviour matrix of the other SDK suites (tests/node,
// tests/python) through the AWS SDK for Go v2 (service/sqs, AWS JSON protocol), with the SDK's
// paginators and its MD5 checksum validation left on (its default). TestMain starts one sqsim
// for the run, as tests/python/sqsim_process.py does: $SQSIM_BIN (default: the debug build of
// this checkout) on 127.0.0.1 and a free port, its listen line read from stdout, stopped with
// SIGTERM at the end and required to exit 0. With $SQSIM_TEST_ENDPOINT set, that running
// server is tested instead. Expected values come from /work/shared/sqs-reference.md.
package sqsimtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

const (
	account = "000000000000"
	region  = "us-east-1"
)

// endpoint is the run's sqsim.
var endpoint string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if ext := os.Getenv("SQSIM_TEST_ENDPOINT"); ext != "" {
		endpoint = strings.TrimRight(ext, "/")
		return m.Run()
	}
	bin := os.Getenv("SQSIM_BIN")
	if bin == "" {
		bin, _ = filepath.Abs("../../target/debug/sqsim")
	}
	if st, err := os.Stat(bin); err != nil || st.Mode()&0o111 == 0 {
		fmt.Fprintf(os.Stderr, "SQSIM_BIN %q is not an executable; build sqsim first\n", bin)
		return 2
	}
	cmd := exec.Command(bin, "--host", "127.0.0.1", "--port", "0")
	// sqsim's settings are dropped from its environment: its flags are the whole story.
	for _, kv := range os.Environ() {
		k := strings.SplitN(kv, "=", 2)[0]
		if strings.HasPrefix(k, "SQSIM_") || k == "SQS_ENDPOINT_STRATEGY" || k == "LOCALSTACK_HOST" || k == "PERSISTENCE" {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	if os.Getenv("RUST_LOG") == "" {
		cmd.Env = append(cmd.Env, "RUST_LOG=warn")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		panic(err)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "cannot start sqsim: %v\n", err)
		return 2
	}
	found := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`sqsim listening on (http://\S+)`)
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
		if !sent {
			close(found)
		}
	}()
	select {
	case ep, ok := <-found:
		if !ok {
			fmt.Fprintf(os.Stderr, "sqsim printed no listen line: %s\n", stderr.String())
			return 2
		}
		endpoint = ep
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		fmt.Fprintf(os.Stderr, "sqsim did not start in 20 s: %s\n", stderr.String())
		return 2
	}
	code := m.Run()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			fmt.Fprintf(os.Stderr, "sqsim did not exit cleanly on SIGTERM: %v\n%s\n", err, stderr.String())
			if code == 0 {
				code = 1
			}
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		fmt.Fprintln(os.Stderr, "sqsim did not stop within 10 s of SIGTERM")
		code = 1
	}
	return code
}

// newClient is an SQS client for `ep`: no retries, checksum validation at its default (on).
func newClient(ep string) *sqs.Client {
	return sqs.New(sqs.Options{
		BaseEndpoint: aws.String(ep),
		Region:       region,
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "test-secret", ""),
		Retryer:      aws.NopRetryer{},
	})
}

var ctx = context.Background()

// current is the running test (the tests run one at a time, none calls t.Parallel), for must.
var current *testing.T

// must returns v, failing the current test if err is not nil.
func must[T any](v T, err error) T {
	current.Helper()
	if err != nil {
		current.Fatalf("unexpected error: %v", err)
	}
	return v
}

func eq[T comparable](t *testing.T, want, got T, what string) {
	t.Helper()
	if want != got {
		t.Fatalf("%s: want %v, got %v", what, want, got)
	}
}

func jsonEq(t *testing.T, want, got any, what string) {
	t.Helper()
	w, _ := json.Marshal(want)
	g, _ := json.Marshal(got)
	if !bytes.Equal(w, g) {
		t.Fatalf("%s:\nwant %s\n got %s", what, w, g)
	}
}

func truth(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		t.Fatalf(format, args...)
	}
}

// expectError checks the error's type (`target`, a pointer to a pointer of the modelled
// error type, or nil for errors the model has no type for), its query error code (the SDK
// reads x-amzn-query-error), its HTTP status and, if not empty, AWS's message.
func expectError(t *testing.T, err error, target any, code string, status int, message string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want error %s, got success", code)
	}
	var api smithy.APIError
	if !errors.As(err, &api) {
		t.Fatalf("not an API error: %v", err)
	}
	if target != nil && !errors.As(err, target) {
		t.Fatalf("want a %T, got %T: %v", target, api, err)
	}
	if target == nil {
		if _, generic := api.(*smithy.GenericAPIError); !generic {
			t.Fatalf("want an unmodelled error, got %T: %v", api, err)
		}
	}
	eq(t, code, api.ErrorCode(), "error code of "+err.Error())
	eq(t, smithy.FaultClient, api.ErrorFault(), "fault of "+err.Error())
	var re *awshttp.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("no HTTP response in %v", err)
	}
	eq(t, status, re.HTTPStatusCode(), "HTTP status of "+err.Error())
	truth(t, re.ServiceRequestID() != "", "a request id in %v", err)
	if message != "" {
		eq(t, message, api.ErrorMessage(), "message")
	}
}

const noQueue = "AWS.SimpleQueueService.NonExistentQueue"

var counter atomic.Int64

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), counter.Add(1))
}

func queueURL(name string) string { return endpoint + "/" + account + "/" + name }
func arn(name string) string      { return "arn:aws:sqs:" + region + ":" + account + ":" + name }

// admin makes an admin call and decodes its JSON reply.
func admin(t *testing.T, method, path string, body any) map[string]any {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, endpoint+path, rd)
	if body != nil {
		req.Header.Set("content-type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s %s -> %d: %s", method, path, resp.StatusCode, raw)
	}
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return out
}

func advance(t *testing.T, seconds int) {
	t.Helper()
	admin(t, "POST", "/_sqsim/clock", map[string]any{"advance_seconds": seconds})
}

func nowMs(t *testing.T) int64 {
	return int64(admin(t, "GET", "/_sqsim/clock", nil)["now_ms"].(float64))
}

// freeze stops the server's clock for the rest of the test.
func freeze(t *testing.T) {
	admin(t, "POST", "/_sqsim/clock", map[string]any{"freeze": true})
	t.Cleanup(func() { admin(t, "POST", "/_sqsim/clock", map[string]any{"freeze": false}) })
}

func md5Hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// md5OfAttributes is MD5OfMessageAttributes as SQS computes it: names sorted by their bytes;
// per attribute len+name, len+DataType, transport byte (1 string, 2 binary), len+value.
func md5OfAttributes(attrs map[string]types.MessageAttributeValue) string {
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	lp := func(b []byte) {
		_ = binary.Write(&buf, binary.BigEndian, uint32(len(b)))
		buf.Write(b)
	}
	for _, n := range names {
		a := attrs[n]
		lp([]byte(n))
		lp([]byte(*a.DataType))
		if a.BinaryValue != nil {
			buf.WriteByte(2)
			lp(a.BinaryValue)
		} else {
			buf.WriteByte(1)
			lp([]byte(*a.StringValue))
		}
	}
	return md5Hex(buf.Bytes())
}

func str(typ, v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String(typ), StringValue: aws.String(v)}
}

func bin(typ string, v []byte) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String(typ), BinaryValue: v}
}

// trickyBody breaks naive XML/JSON handling (the Node suite's TRICKY_BODY).
const trickyBody = "line1\r\nline2\rline3\n\"double\" 'single' &quot; <tag> & \\ back\\slash \t tab " +
	"héllo wörld ñ 日本語 Ελληνικά 🚀👍🏽 \U0010FFFF \uE000 end\r"

// nonUTF8 are bytes that are not UTF-8.
var nonUTF8 = []byte{0x00, 0x01, 0xfe, 0xff, 0x0d, 0x0a, 0x22, 0x80}

// suite is one client plus queue helpers for a test.
type suite struct {
	t *testing.T
	c *sqs.Client
}

func newSuite(t *testing.T) *suite {
	current = t
	return &suite{t: t, c: newClient(endpoint)}
}

func (s *suite) create(prefix string, attrs map[string]string) (string, string) {
	s.t.Helper()
	name := uniqueName(prefix)
	out := must(s.c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs}))
	return name, *out.QueueUrl
}

func (s *suite) fifo(prefix string, attrs map[string]string) (string, string) {
	s.t.Helper()
	a := map[string]string{"FifoQueue": "true"}
	for k, v := range attrs {
		a[k] = v
	}
	name := uniqueName(prefix) + ".fifo"
	out := must(s.c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: a}))
	return name, *out.QueueUrl
}

func (s *suite) attrs(url string, names ...types.QueueAttributeName) map[string]string {
	s.t.Helper()
	if len(names) == 0 {
		names = []types.QueueAttributeName{types.QueueAttributeNameAll}
	}
	return must(s.c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: names})).Attributes
}

// counts is [visible, in flight, delayed].
func (s *suite) counts(url string) [3]string {
	a := s.attrs(url, "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed")
	return [3]string{a["ApproximateNumberOfMessages"], a["ApproximateNumberOfMessagesNotVisible"], a["ApproximateNumberOfMessagesDelayed"]}
}

func (s *suite) receive(url string) []types.Message {
	s.t.Helper()
	return must(s.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10})).Messages
}

func (s *suite) send(url, body string) *sqs.SendMessageOutput {
	s.t.Helper()
	return must(s.c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)}))
}

func bodies(ms []types.Message) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, *m.Body)
	}
	sort.Strings(out)
	return out
}
