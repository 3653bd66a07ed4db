package sqsimtest

import (
	"fmt"
	"math/big"
	"regexp"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

func TestFifoOrderSequenceNumbersAndSystemAttributes(t *testing.T) {
	s := newSuite(t)
	_, url := s.fifo("order", nil)
	var seqs []string
	for i := 1; i <= 3; i++ {
		out := must(s.c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(fmt.Sprintf("g1-m%d", i)),
			MessageGroupId: aws.String("g1"), MessageDeduplicationId: aws.String(fmt.Sprintf("d1-%d", i))}))
		truth(t, regexp.MustCompile(`^\d{20}$`).MatchString(*out.SequenceNumber), "SequenceNumber is 20 digits: %s", *out.SequenceNumber)
		seqs = append(seqs, *out.SequenceNumber)
	}
	batch := must(s.c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("a"), MessageBody: aws.String("g2-m1"), MessageGroupId: aws.String("g2"), MessageDeduplicationId: aws.String("d2-1")},
		{Id: aws.String("b"), MessageBody: aws.String("g2-m2"), MessageGroupId: aws.String("g2"), MessageDeduplicationId: aws.String("d2-2")},
	}}))
	eq(t, 0, len(batch.Failed), "no failures")
	for _, e := range batch.Successful {
		seqs = append(seqs, *e.SequenceNumber)
	}
	for i := 1; i < len(seqs); i++ {
		a, _ := new(big.Int).SetString(seqs[i-1], 10)
		b, _ := new(big.Int).SetString(seqs[i], 10)
		truth(t, b.Cmp(a) > 0, "increasing SequenceNumbers: %v", seqs)
	}
	ms := must(s.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})).Messages
	var order []string
	for _, m := range ms {
		order = append(order, *m.Body)
	}
	jsonEq(t, []string{"g1-m1", "g1-m2", "g1-m3", "g2-m1", "g2-m2"}, order, "group order")
	eq(t, "g1", ms[0].Attributes["MessageGroupId"], "MessageGroupId")
	eq(t, "d1-1", ms[0].Attributes["MessageDeduplicationId"], "MessageDeduplicationId")
	eq(t, seqs[0], ms[0].Attributes["SequenceNumber"], "SequenceNumber")
	eq(t, 0, len(s.receive(url)), "groups locked while in flight")
}

func TestFifoDeduplication(t *testing.T) {
	s := newSuite(t)
	_, url := s.fifo("dedup", map[string]string{"ContentBasedDeduplication": "true"})
	send := func(dedup *string) string {
		return *must(s.c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("same"),
			MessageGroupId: aws.String("g"), MessageDeduplicationId: dedup})).MessageId
	}
	first := send(nil)
	eq(t, first, send(nil), "a duplicate returns the original MessageId")
	truth(t, send(aws.String("x")) != first, "an explicit id overrides the content's")
	ms := must(s.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameMessageDeduplicationId}})).Messages
	eq(t, 2, len(ms), "two enqueued")
	eq(t, sha256Hex("same"), ms[0].Attributes["MessageDeduplicationId"], "content-based id is the body's SHA-256")
	advance(t, 301)
	truth(t, send(nil) != first, "the window is 5 minutes")
}

func TestFifoRequirementsAndReceiveAttempts(t *testing.T) {
	s := newSuite(t)
	_, url := s.fifo("fiforeq", nil)
	_, err := s.c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("x"), MessageDeduplicationId: aws.String("d")})
	expectError(t, err, nil, "MissingParameter", 400, "The request must contain the parameter MessageGroupId.")
	_, err = s.c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("x"), MessageGroupId: aws.String("g")})
	expectError(t, err, nil, "InvalidParameterValue", 400,
		"The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
	for i, b := range []string{"a", "b"} {
		must(s.c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(b), MessageGroupId: aws.String("g"),
			MessageDeduplicationId: aws.String(fmt.Sprint(i))}))
	}
	in := &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, ReceiveRequestAttemptId: aws.String("attempt-1")}
	first := must(s.c.ReceiveMessage(ctx, in)).Messages
	retry := must(s.c.ReceiveMessage(ctx, in)).Messages
	eq(t, 2, len(first), "both")
	for i := range first {
		eq(t, *first[i].ReceiptHandle, *retry[i].ReceiptHandle, "a retried attempt returns the same handles")
	}
}

func redrivePolicy(dlqName string, max int) string {
	return fmt.Sprintf(`{"deadLetterTargetArn":"%s","maxReceiveCount":%d}`, arn(dlqName), max)
}

func TestDeadLetterAndListSourcesPaginator(t *testing.T) {
	s := newSuite(t)
	dlqName, dlqURL := s.create("dlq", nil)
	srcName, srcURL := s.create("src", map[string]string{"RedrivePolicy": redrivePolicy(dlqName, 2)})
	_, src2 := s.create("src2", map[string]string{"RedrivePolicy": redrivePolicy(dlqName, 5)})
	_, src3 := s.create("src3", map[string]string{"RedrivePolicy": redrivePolicy(dlqName, 5)})
	id := *s.send(srcURL, "poison").MessageId
	for i := 0; i < 2; i++ {
		eq(t, id, *s.receive(srcURL)[0].MessageId, "delivered")
		advance(t, 31)
	}
	eq(t, 0, len(s.receive(srcURL)), "the third receive moves it")
	dead := must(s.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &dlqURL,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})).Messages[0]
	eq(t, id, *dead.MessageId, "same message")
	eq(t, arn(srcName), dead.Attributes["DeadLetterQueueSourceArn"], "DeadLetterQueueSourceArn")
	var sources []string
	pages := 0
	p := sqs.NewListDeadLetterSourceQueuesPaginator(s.c, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: &dlqURL, MaxResults: aws.Int32(2)})
	for p.HasMorePages() {
		sources = append(sources, must(p.NextPage(ctx)).QueueUrls...)
		pages++
		truth(t, pages <= 4, "the paginator does not stop")
	}
	want := []string{srcURL, src2, src3}
	sort.Strings(want)
	sort.Strings(sources)
	jsonEq(t, want, sources, "every source, through the paginator")
	eq(t, 2, pages, "pages of 2")
	_, err := s.c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &srcURL,
		Attributes: map[string]string{"RedrivePolicy": redrivePolicy(dlqName, 0)}})
	expectError(t, err, nil, "InvalidParameterValue", 400, "")
}

func (s *suite) waitTask(sourceArn string, done func(types.ListMessageMoveTasksResultEntry) bool, what string) types.ListMessageMoveTasksResultEntry {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rs := must(s.c.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{SourceArn: &sourceArn, MaxResults: aws.Int32(10)})).Results
		if len(rs) > 0 && done(rs[0]) {
			return rs[0]
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("move task never reached %s: %+v", what, rs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMessageMoveTasks(t *testing.T) {
	s := newSuite(t)
	dlqName, dlqURL := s.create("mdlq", nil)
	_, srcURL := s.create("msrc", map[string]string{"RedrivePolicy": redrivePolicy(dlqName, 1)})
	for i := 0; i < 3; i++ {
		s.send(srcURL, fmt.Sprint("m", i))
	}
	for round := 0; round < 2; round++ {
		for _, m := range s.receive(srcURL) {
			must(s.c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &srcURL, ReceiptHandle: m.ReceiptHandle}))
		}
	}
	eq(t, [3]string{"3", "0", "0"}, s.counts(dlqURL), "dead-lettered")
	dlqArn := arn(dlqName)
	_, err := s.c.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(arn(uniqueName("ghost")))})
	var notFound *types.ResourceNotFoundException
	expectError(t, err, &notFound, "ResourceNotFoundException", 404, "")
	_, err = s.c.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: &dlqArn, MaxNumberOfMessagesPerSecond: aws.Int32(501)})
	expectError(t, err, nil, "InvalidParameterValue", 400, "")

	func() {
		freeze(t)
		handle := *must(s.c.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: &dlqArn, MaxNumberOfMessagesPerSecond: aws.Int32(1)})).TaskHandle
		running := s.waitTask(dlqArn, func(e types.ListMessageMoveTasksResultEntry) bool { return e.ApproximateNumberOfMessagesMoved >= 1 }, "1 moved")
		eq(t, "RUNNING", *running.Status, "Status")
		eq(t, handle, *running.TaskHandle, "TaskHandle")
		eq(t, int64(3), *running.ApproximateNumberOfMessagesToMove, "ApproximateNumberOfMessagesToMove")
		truth(t, running.StartedTimestamp > 1_000_000_000_000, "StartedTimestamp in epoch ms: %d", running.StartedTimestamp)
		_, err := s.c.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: &dlqArn})
		expectError(t, err, nil, "InvalidParameterValue", 400,
			"There is already a task running. Only one active task is allowed for a source queue arn at a given time.")
		eq(t, int64(1), must(s.c.CancelMessageMoveTask(ctx, &sqs.CancelMessageMoveTaskInput{TaskHandle: &handle})).ApproximateNumberOfMessagesMoved, "moved before the cancel")
		s.waitTask(dlqArn, func(e types.ListMessageMoveTasksResultEntry) bool { return *e.Status == "CANCELLED" }, "CANCELLED")
		admin(t, "POST", "/_sqsim/clock", map[string]any{"freeze": false})
	}()
	must(s.c.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: &dlqArn}))
	done := s.waitTask(dlqArn, func(e types.ListMessageMoveTasksResultEntry) bool { return *e.Status == "COMPLETED" }, "COMPLETED")
	eq(t, int64(2), done.ApproximateNumberOfMessagesMoved, "the rest moved")
	eq(t, [3]string{"3", "0", "0"}, s.counts(srcURL), "all back in the source")
	eq(t, [3]string{"0", "0", "0"}, s.counts(dlqURL), "the DLQ is empty")
}
