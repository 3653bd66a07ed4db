package sqsimtest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// corruptingProxy is a reverse proxy to sqsim that replaces the digest named by *field in
// every answer with a wrong one.
func corruptingProxy(t *testing.T, field *atomic.Value, corrupted *atomic.Int32) string {
	target, _ := url.Parse(endpoint)
	p := httputil.NewSingleHostReverseProxy(target)
	p.ModifyResponse = func(resp *http.Response) error {
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if f, _ := field.Load().(string); f != "" {
			re := regexp.MustCompile(`("` + f + `"\s*:\s*")[0-9a-f]{32}`)
			broken := re.ReplaceAll(raw, []byte("${1}00000000000000000000000000000000"))
			if !bytes.Equal(broken, raw) {
				corrupted.Add(1)
			}
			raw = broken
		}
		resp.Body = io.NopCloser(bytes.NewReader(raw))
		resp.ContentLength = int64(len(raw))
		resp.Header.Set("Content-Length", strconv.Itoa(len(raw)))
		return nil
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv.URL
}

// The SDK's checksum validation is on: a wrong MD5 of the body on a send, a batch send or a
// receive fails the call, which is what makes every other test here fail when sqsim's body
// digests are wrong. (The Go SDK checks MD5OfMessageBody and MD5OfBody only, not the
// attribute digests — service/sqs/cust_checksum_validation.go — so the tests compare
// MD5OfMessageAttributes and MD5OfMessageSystemAttributes themselves.)
func TestChecksumValidationRefusesWrongDigests(t *testing.T) {
	s := newSuite(t)
	_, qurl := s.create("md5", nil)
	var field atomic.Value
	var corrupted atomic.Int32
	field.Store("")
	via := newClient(corruptingProxy(t, &field, &corrupted))
	attrs := map[string]types.MessageAttributeValue{"Foo": str("String", "Bar")}
	must(via.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &qurl, MessageBody: aws.String("intact"), MessageAttributes: attrs}))

	refused := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), "md5") && !strings.Contains(strings.ToLower(err.Error()), "checksum") {
			t.Fatalf("%s: want a checksum error, got %v", what, err)
		}
	}
	field.Store("MD5OfMessageBody")
	_, err := via.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &qurl, MessageBody: aws.String("hello"), MessageAttributes: attrs})
	refused("SendMessage body digest", err)
	field.Store("MD5OfMessageBody")
	_, err = via.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &qurl, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("a"), MessageBody: aws.String("batched")}}})
	refused("SendMessageBatch body digest", err)
	field.Store("MD5OfBody")
	_, err = via.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &qurl, MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"}})
	refused("ReceiveMessage body digest", err)
	eq(t, int32(3), corrupted.Load(), "answers the proxy broke")
}
