package sqsimtest

import (
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

func TestCreateQueueReturnsURLAndAppliesAttributes(t *testing.T) {
	s := newSuite(t)
	want := map[string]string{"DelaySeconds": "5", "MaximumMessageSize": "2048", "MessageRetentionPeriod": "86400",
		"ReceiveMessageWaitTimeSeconds": "3", "VisibilityTimeout": "45"}
	name, url := s.create("create", want)
	eq(t, queueURL(name), url, "QueueUrl")
	got := s.attrs(url)
	for k, v := range want {
		eq(t, v, got[k], k)
	}
	eq(t, arn(name), got["QueueArn"], "QueueArn")
}

func TestCreateQueueIdempotentAndQueueNameExists(t *testing.T) {
	s := newSuite(t)
	name, url := s.create("idem", map[string]string{"DelaySeconds": "2", "VisibilityTimeout": "60"})
	again := must(s.c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: map[string]string{"VisibilityTimeout": "60"}}))
	eq(t, url, *again.QueueUrl, "same attributes, same queue")
	_, err := s.c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: map[string]string{"DelaySeconds": "3"}})
	var exists *types.QueueNameExists
	expectError(t, err, &exists, "QueueAlreadyExists", 400, "A queue already exists with the same name and a different value for attribute DelaySeconds")
}

func TestCreateQueueRejectsBadNamesAndValues(t *testing.T) {
	s := newSuite(t)
	_, err := s.c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("has space")})
	expectError(t, err, nil, "InvalidParameterValue", 400, "")
	_, err = s.c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(strings.Repeat("x", 81))})
	expectError(t, err, nil, "InvalidParameterValue", 400, "")
	_, err = s.c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(uniqueName("bad")), Attributes: map[string]string{"VisibilityTimeout": "43201"}})
	var badValue *types.InvalidAttributeValue
	expectError(t, err, &badValue, "InvalidAttributeValue", 400, "Invalid value for the parameter VisibilityTimeout.")
	_, err = s.c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(uniqueName("bad")), Attributes: map[string]string{"ContentBasedDeduplication": "true"}})
	var badName *types.InvalidAttributeName
	expectError(t, err, &badName, "InvalidAttributeName", 400, "Unknown Attribute ContentBasedDeduplication.")
}

func TestCreateFifoQueueWithTags(t *testing.T) {
	s := newSuite(t)
	name := uniqueName("fifo") + ".fifo"
	out := must(s.c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name,
		Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"},
		Tags:       map[string]string{"team": "core", "env": "test"}}))
	a := s.attrs(*out.QueueUrl)
	eq(t, "true", a["FifoQueue"], "FifoQueue")
	eq(t, "queue", a["DeduplicationScope"], "DeduplicationScope")
	eq(t, "perQueue", a["FifoThroughputLimit"], "FifoThroughputLimit")
	tags := must(s.c.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: out.QueueUrl})).Tags
	jsonEq(t, map[string]string{"team": "core", "env": "test"}, tags, "tags")
}

func TestGetQueueURLAndQueueDoesNotExist(t *testing.T) {
	s := newSuite(t)
	name, url := s.create("geturl", nil)
	eq(t, url, *must(s.c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &name})).QueueUrl, "GetQueueUrl")
	var missing *types.QueueDoesNotExist
	_, err := s.c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(uniqueName("missing"))})
	expectError(t, err, &missing, noQueue, 400, "The specified queue does not exist.")
	ghost := aws.String(queueURL(uniqueName("ghost")))
	_, err = s.c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: ghost, MessageBody: aws.String("x")})
	expectError(t, err, &missing, noQueue, 400, "")
	_, err = s.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: ghost})
	expectError(t, err, &missing, noQueue, 400, "")
	_, err = s.c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: ghost})
	expectError(t, err, &missing, noQueue, 400, "")
	_, err = s.c.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: ghost})
	expectError(t, err, &missing, noQueue, 400, "")
}

func TestListQueuesPagesAndPaginator(t *testing.T) {
	s := newSuite(t)
	prefix := uniqueName("page")
	var urls []string
	for _, x := range []string{"a", "b", "c", "d", "e"} {
		urls = append(urls, *must(s.c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(prefix + "-" + x)})).QueueUrl)
	}
	var sizes []int
	var all []string
	p := sqs.NewListQueuesPaginator(s.c, &sqs.ListQueuesInput{QueueNamePrefix: &prefix, MaxResults: aws.Int32(2)})
	for p.HasMorePages() {
		page := must(p.NextPage(ctx))
		sizes = append(sizes, len(page.QueueUrls))
		all = append(all, page.QueueUrls...)
		truth(t, len(sizes) <= 5, "the paginator does not stop")
	}
	jsonEq(t, []int{2, 2, 1}, sizes, "page sizes")
	jsonEq(t, urls, all, "every queue, in order")
	exact := must(s.c.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: &prefix, MaxResults: aws.Int32(5)}))
	eq(t, 5, len(exact.QueueUrls), "5 of 5")
	truth(t, exact.NextToken == nil, "no NextToken when nothing is left: %v", exact.NextToken)
	none := must(s.c.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String(strings.ToUpper(prefix))}))
	eq(t, 0, len(none.QueueUrls), "the prefix is case-sensitive")
	_, err := s.c.ListQueues(ctx, &sqs.ListQueuesInput{MaxResults: aws.Int32(1001)})
	expectError(t, err, nil, "InvalidParameterValue", 400, "")
}

func TestGetQueueAttributesAllOnANewQueue(t *testing.T) {
	s := newSuite(t)
	_, url := s.create("attrs", nil)
	now := nowMs(t) / 1000
	a := s.attrs(url)
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	jsonEq(t, []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed", "ApproximateNumberOfMessagesNotVisible",
		"CreatedTimestamp", "DelaySeconds", "LastModifiedTimestamp", "MaximumMessageSize", "MessageRetentionPeriod", "QueueArn",
		"ReceiveMessageWaitTimeSeconds", "SqsManagedSseEnabled", "VisibilityTimeout"}, keys, "All")
	eq(t, "1048576", a["MaximumMessageSize"], "MaximumMessageSize")
	eq(t, "345600", a["MessageRetentionPeriod"], "MessageRetentionPeriod")
	eq(t, "30", a["VisibilityTimeout"], "VisibilityTimeout")
	created := parseInt(t, a["CreatedTimestamp"])
	truth(t, created-now <= 2 && now-created <= 2, "CreatedTimestamp %d is epoch seconds (now %d)", created, now)
	none := must(s.c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url}))
	eq(t, 0, len(none.Attributes), "no AttributeNames, no Attributes")
	_, err := s.c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{"Foobar"}})
	var badName *types.InvalidAttributeName
	expectError(t, err, &badName, "InvalidAttributeName", 400, "Unknown Attribute Foobar.")
}

func TestSetQueueAttributesAndTags(t *testing.T) {
	s := newSuite(t)
	_, url := s.create("setattrs", nil)
	before := s.attrs(url)
	advance(t, 10)
	must(s.c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &url,
		Attributes: map[string]string{"VisibilityTimeout": "120", "DelaySeconds": "7"}}))
	after := s.attrs(url)
	eq(t, "120", after["VisibilityTimeout"], "VisibilityTimeout")
	eq(t, "7", after["DelaySeconds"], "DelaySeconds")
	truth(t, parseInt(t, after["LastModifiedTimestamp"]) >= parseInt(t, before["LastModifiedTimestamp"])+10, "LastModifiedTimestamp moved")
	_, err := s.c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: map[string]string{"MessageRetentionPeriod": "59"}})
	var badValue *types.InvalidAttributeValue
	expectError(t, err, &badValue, "InvalidAttributeValue", 400, "Invalid value for the parameter MessageRetentionPeriod.")

	must(s.c.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: &url, Tags: map[string]string{"a": "1", "B": "2"}}))
	must(s.c.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: &url, Tags: map[string]string{"a": "3"}}))
	jsonEq(t, map[string]string{"B": "2", "a": "3"}, must(s.c.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: &url})).Tags, "merged tags")
	must(s.c.UntagQueue(ctx, &sqs.UntagQueueInput{QueueUrl: &url, TagKeys: []string{"B", "missing"}}))
	jsonEq(t, map[string]string{"a": "3"}, must(s.c.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: &url})).Tags, "untagged")
}

func TestPurgeDeleteAndQueueDeletedRecently(t *testing.T) {
	s := newSuite(t)
	freeze(t)
	name, url := s.create("purge", nil)
	s.send(url, "visible")
	s.send(url, "inflight")
	must(s.c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("delayed"), DelaySeconds: 600}))
	must(s.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url}))
	eq(t, [3]string{"1", "1", "1"}, s.counts(url), "counts")
	must(s.c.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: &url}))
	eq(t, [3]string{"0", "0", "0"}, s.counts(url), "purged")
	_, err := s.c.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: &url})
	var inProgress *types.PurgeQueueInProgress
	expectError(t, err, &inProgress, "AWS.SimpleQueueService.PurgeQueueInProgress", 403, "")
	must(s.c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: &url}))
	_, err = s.c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name})
	var recently *types.QueueDeletedRecently
	expectError(t, err, &recently, "AWS.SimpleQueueService.QueueDeletedRecently", 400,
		"You must wait 60 seconds after deleting a queue before you can create another with the same name.")
	advance(t, 60)
	eq(t, url, *must(s.c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name})).QueueUrl, "the name is free again")
}

func TestAddPermissionAndOverLimit(t *testing.T) {
	s := newSuite(t)
	_, url := s.create("perm", nil)
	must(s.c.AddPermission(ctx, &sqs.AddPermissionInput{QueueUrl: &url, Label: aws.String("one"),
		AWSAccountIds: []string{"111122223333"}, Actions: []string{"ReceiveMessage"}}))
	truth(t, strings.Contains(s.attrs(url, "Policy")["Policy"], `"Sid":"one"`), "the statement is in Policy")
	eight := []string{"ChangeMessageVisibility", "DeleteMessage", "GetQueueAttributes", "GetQueueUrl",
		"ListDeadLetterSourceQueues", "PurgeQueue", "ReceiveMessage", "SendMessage"}
	_, err := s.c.AddPermission(ctx, &sqs.AddPermissionInput{QueueUrl: &url, Label: aws.String("many"),
		AWSAccountIds: []string{"111122223333"}, Actions: eight})
	var over *types.OverLimit
	expectError(t, err, &over, "OverLimit", 403, "8 Actions were found, maximum allowed is 7.")
	must(s.c.RemovePermission(ctx, &sqs.RemovePermissionInput{QueueUrl: &url, Label: aws.String("one")}))
	_, has := s.attrs(url)["Policy"]
	truth(t, !has, "removing the last statement deletes Policy")
}

func TestLongPollWakesOnSendAndTimesOutEmpty(t *testing.T) {
	s := newSuite(t)
	_, url := s.create("longpoll", map[string]string{"ReceiveMessageWaitTimeSeconds": "1"})
	start := time.Now()
	eq(t, 0, len(s.receive(url)), "empty")
	elapsed := time.Since(start)
	truth(t, elapsed >= 900*time.Millisecond && elapsed < 5*time.Second, "the queue's 1 s wait took %v", elapsed)
	start = time.Now()
	got := make(chan *sqs.ReceiveMessageOutput, 1)
	errs := make(chan error, 1)
	go func() {
		out, err := s.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 20, MaxNumberOfMessages: 10})
		got <- out
		errs <- err
	}()
	time.Sleep(500 * time.Millisecond)
	other := newClient(endpoint)
	must(other.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("wake up")}))
	out := <-got
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	elapsed = time.Since(start)
	jsonEq(t, []string{"wake up"}, bodies(out.Messages), "woken by the send")
	truth(t, elapsed >= 400*time.Millisecond && elapsed < 5*time.Second, "long poll took %v", elapsed)
}

func TestTheClientHasThe23Actions(t *testing.T) {
	// Every operation of the SDK's client is one the suites call: an action added in a later
	// SDK release shows up here.
	want := []string{"AddPermission", "CancelMessageMoveTask", "ChangeMessageVisibility", "ChangeMessageVisibilityBatch",
		"CreateQueue", "DeleteMessage", "DeleteMessageBatch", "DeleteQueue", "GetQueueAttributes", "GetQueueUrl",
		"ListDeadLetterSourceQueues", "ListMessageMoveTasks", "ListQueueTags", "ListQueues", "PurgeQueue", "ReceiveMessage",
		"RemovePermission", "SendMessage", "SendMessageBatch", "SetQueueAttributes", "StartMessageMoveTask", "TagQueue", "UntagQueue"}
	var got []string
	typ := reflect.TypeOf(&sqs.Client{})
	for i := 0; i < typ.NumMethod(); i++ {
		if name := typ.Method(i).Name; name != "Options" {
			got = append(got, name)
		}
	}
	jsonEq(t, want, got, "the client's operations")
}
