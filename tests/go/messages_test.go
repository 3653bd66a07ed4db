package sqsimtest

import (
	"bytes"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

func keys[V any](m map[string]V) []string {
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestSendEveryAttributeTypeAndReceiveIt(t *testing.T) {
	s := newSuite(t)
	_, url := s.create("send", nil)
	ma := map[string]types.MessageAttributeValue{
		"Str":        str("String", "quote \" cr \r nl \n ünïcødé 😀"),
		"Num":        str("Number", "-12345.678e3"),
		"Num.custom": str("Number.int", "42"),
		"Bin":        bin("Binary", nonUTF8),
		"Bin.gif":    bin("Binary.gif", []byte("GIF89a")),
		"attr.1øßä":  str("String.label", "x"),
	}
	sent := must(s.c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(trickyBody), MessageAttributes: ma}))
	truth(t, regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(*sent.MessageId), "MessageId %s", *sent.MessageId)
	eq(t, md5Hex([]byte(trickyBody)), *sent.MD5OfMessageBody, "MD5OfMessageBody")
	eq(t, md5OfAttributes(ma), *sent.MD5OfMessageAttributes, "MD5OfMessageAttributes")
	truth(t, sent.MD5OfMessageSystemAttributes == nil && sent.SequenceNumber == nil, "no system digest, no SequenceNumber")

	m := must(s.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MessageAttributeNames: []string{"All"}})).Messages[0]
	eq(t, *sent.MessageId, *m.MessageId, "MessageId")
	eq(t, trickyBody, *m.Body, "Body")
	eq(t, *sent.MD5OfMessageBody, *m.MD5OfBody, "MD5OfBody")
	eq(t, *sent.MD5OfMessageAttributes, *m.MD5OfMessageAttributes, "MD5OfMessageAttributes")
	jsonEq(t, keys(ma), keys(m.MessageAttributes), "attribute names")
	truth(t, bytes.Equal(nonUTF8, m.MessageAttributes["Bin"].BinaryValue), "non-UTF-8 bytes intact: %v", m.MessageAttributes["Bin"].BinaryValue)
	for name, a := range ma {
		got := m.MessageAttributes[name]
		eq(t, *a.DataType, *got.DataType, name+" DataType")
		if a.StringValue != nil {
			eq(t, *a.StringValue, *got.StringValue, name+" StringValue")
		}
	}
}

func TestAttributeDigestsMatchTheAwsRecordedOnes(t *testing.T) {
	s := newSuite(t)
	_, url := s.create("vectors", nil)
	vectors := []struct {
		attrs map[string]types.MessageAttributeValue
		md5   string
	}{
		{map[string]types.MessageAttributeValue{"Foo": str("String", "Bar")}, "ae7155c6026991b6d54b11589678bf9c"},
		{map[string]types.MessageAttributeValue{"MyAttribute": str("String", "foobar")}, "adb59cd4678ea5a855436b949cd07ab6"},
		{map[string]types.MessageAttributeValue{"timestamp": str("Number", "1493147359900")}, "235c5c510d26fb653d073faed50ae77c"},
		{map[string]types.MessageAttributeValue{"General": str("String", "Kenobi"), "Hello": str("String", "There"),
			"Help.Me": str("String", "Me")}, "4c360f3fdafd970e05fae2f149d997f5"},
		{map[string]types.MessageAttributeValue{"attr1": bin("Binary",
			[]byte("traceparent\x1e00-774062d6c37081a5a0b9b5b88e30627c-2d2482211f6489da-01"))}, "8cbe4db156db8a94db8b801b7addb984"},
	}
	for _, v := range vectors {
		eq(t, v.md5, md5OfAttributes(v.attrs), "the test's own digest")
		out := must(s.c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("hello"), MessageAttributes: v.attrs}))
		eq(t, "5d41402abc4b2a76b9719d911017c592", *out.MD5OfMessageBody, "MD5OfMessageBody")
		eq(t, v.md5, *out.MD5OfMessageAttributes, strings.Join(keys(v.attrs), ","))
	}
}

func TestSystemAttributesAndTheirDigest(t *testing.T) {
	s := newSuite(t)
	_, url := s.create("sysattr", nil)
	plain := s.send(url, "plain")
	truth(t, plain.MD5OfMessageAttributes == nil, "no attributes, no digest")
	trace := "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	out := must(s.c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("traced"),
		MessageAttributes: map[string]types.MessageAttributeValue{"Foo": str("String", "Bar")},
		MessageSystemAttributes: map[string]types.MessageSystemAttributeValue{
			"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String(trace)}}}))
	eq(t, "5ae4d5d7636402d80f4eb6d213245a88", *out.MD5OfMessageSystemAttributes, "MD5OfMessageSystemAttributes")
	eq(t, "ae7155c6026991b6d54b11589678bf9c", *out.MD5OfMessageAttributes, "MD5OfMessageAttributes")
	now := nowMs(t)
	ms := must(s.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})).Messages
	eq(t, 2, len(ms), "two messages")
	byBody := map[string]types.Message{}
	for _, m := range ms {
		byBody[*m.Body] = m
	}
	eq(t, trace, byBody["traced"].Attributes["AWSTraceHeader"], "AWSTraceHeader")
	u := byBody["plain"].Attributes
	jsonEq(t, []string{"ApproximateFirstReceiveTimestamp", "ApproximateReceiveCount", "SenderId", "SentTimestamp"}, keys(u), "All system attributes")
	eq(t, account, u["SenderId"], "SenderId")
	eq(t, "1", u["ApproximateReceiveCount"], "ApproximateReceiveCount")
	truth(t, regexp.MustCompile(`^\d{13}$`).MatchString(u["SentTimestamp"]), "SentTimestamp in epoch ms: %s", u["SentTimestamp"])
	sentAt := parseInt(t, u["SentTimestamp"])
	truth(t, sentAt-now < 5000 && now-sentAt < 5000, "SentTimestamp %d near now %d", sentAt, now)
	truth(t, parseInt(t, u["ApproximateFirstReceiveTimestamp"]) >= sentAt, "first receive after the send")
	truth(t, byBody["plain"].MessageAttributes == nil && byBody["plain"].MD5OfMessageAttributes == nil, "no message attributes asked for")
}

func TestMessageAttributeFilterDigestsCoverTheSubset(t *testing.T) {
	s := newSuite(t)
	_, url := s.create("filter", nil)
	must(s.c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("filter"),
		MessageAttributes: map[string]types.MessageAttributeValue{"General": str("String", "Kenobi"), "Hello": str("String", "There"),
			"Help.Me": str("String", "Me")}}))
	cases := []struct {
		filter []string
		names  []string
		md5    string
	}{
		{[]string{"All"}, []string{"General", "Hello", "Help.Me"}, "4c360f3fdafd970e05fae2f149d997f5"},
		{[]string{"Hel.*"}, []string{"Hello", "Help.Me"}, "83fee93c1bcd8b9a5a923ffacdc636c7"},
		{[]string{"General", "Hello"}, []string{"General", "Hello"}, "fca026605781cb4126a1e9044df24232"},
		{[]string{"Nope"}, []string{}, ""},
	}
	for _, c := range cases {
		m := must(s.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MessageAttributeNames: c.filter})).Messages[0]
		// Visible again at once (VisibilityTimeout 0 on the receive is Go's zero value: not sent).
		must(s.c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}))
		jsonEq(t, c.names, keys(m.MessageAttributes), "filter "+strings.Join(c.filter, ","))
		eq(t, c.md5, aws.ToString(m.MD5OfMessageAttributes), "digest for "+strings.Join(c.filter, ","))
	}
}

func TestSendRejectsInvalidBodiesAndAttributes(t *testing.T) {
	s := newSuite(t)
	_, url := s.create("sendbad", map[string]string{"MaximumMessageSize": "1024"})
	send := func(in sqs.SendMessageInput) error {
		in.QueueUrl = &url
		_, err := s.c.SendMessage(ctx, &in)
		return err
	}
	var contents *types.InvalidMessageContents
	expectError(t, send(sqs.SendMessageInput{MessageBody: aws.String("nul \x00 here")}), &contents, "InvalidMessageContents", 400, "")
	expectError(t, send(sqs.SendMessageInput{MessageBody: aws.String("bad \uFFFF")}), &contents, "InvalidMessageContents", 400, "")
	expectError(t, send(sqs.SendMessageInput{MessageBody: aws.String("")}), nil, "MissingParameter", 400,
		"The request must contain the parameter MessageBody.")
	expectError(t, send(sqs.SendMessageInput{MessageBody: aws.String("x"),
		MessageAttributes: map[string]types.MessageAttributeValue{"ErrorDetails": str("String", "")}}), nil, "InvalidParameterValue", 400,
		"Message (user) attribute 'ErrorDetails' must contain a non-empty value of type 'String'.")
	expectError(t, send(sqs.SendMessageInput{MessageBody: aws.String(strings.Repeat("x", 1025))}), nil, "InvalidParameterValue", 400,
		"One or more parameters are invalid. Reason: Message must be shorter than 1024 bytes.")
	expectError(t, send(sqs.SendMessageInput{MessageBody: aws.String("x"), DelaySeconds: 901}), nil, "InvalidParameterValue", 400, "")
	must(s.c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(strings.Repeat("x", 1024))}))
	eq(t, [3]string{"1", "0", "0"}, s.counts(url), "only the valid send was kept")
}

func TestDelaySecondsWaitsForTheClock(t *testing.T) {
	s := newSuite(t)
	_, url := s.create("delay", map[string]string{"DelaySeconds": "10"})
	s.send(url, "queue-delay")
	must(s.c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("long"), DelaySeconds: 30}))
	eq(t, [3]string{"0", "0", "2"}, s.counts(url), "both delayed")
	advance(t, 11)
	jsonEq(t, []string{"queue-delay"}, bodies(s.receiveAndDelete(url)), "after 11 s")
	advance(t, 20)
	jsonEq(t, []string{"long"}, bodies(s.receiveAndDelete(url)), "after 31 s")
}

func (s *suite) receiveAndDelete(url string) []types.Message {
	ms := s.receive(url)
	for _, m := range ms {
		must(s.c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}))
	}
	return ms
}

func TestSendMessageBatchPartialFailuresAndDigests(t *testing.T) {
	s := newSuite(t)
	_, url := s.create("batch", map[string]string{"MaximumMessageSize": "1024"})
	out := must(s.c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("ok1"), MessageBody: aws.String("fine")},
		{Id: aws.String("badchars"), MessageBody: aws.String("bad \x01 char")},
		{Id: aws.String("toolong"), MessageBody: aws.String(strings.Repeat("y", 1025))},
		{Id: aws.String("ok2"), MessageBody: aws.String("also fine"), MessageAttributes: map[string]types.MessageAttributeValue{"Foo": str("String", "Bar")}},
	}}))
	ok := map[string]types.SendMessageBatchResultEntry{}
	for _, e := range out.Successful {
		ok[*e.Id] = e
	}
	jsonEq(t, []string{"ok1", "ok2"}, keys(ok), "successful")
	eq(t, md5Hex([]byte("fine")), *ok["ok1"].MD5OfMessageBody, "ok1 body digest")
	eq(t, "ae7155c6026991b6d54b11589678bf9c", *ok["ok2"].MD5OfMessageAttributes, "ok2 attribute digest")
	failed := map[string]types.BatchResultErrorEntry{}
	for _, e := range out.Failed {
		failed[*e.Id] = e
	}
	jsonEq(t, []string{"badchars", "toolong"}, keys(failed), "failed")
	eq(t, "InvalidMessageContents", *failed["badchars"].Code, "badchars code")
	truth(t, failed["badchars"].SenderFault, "SenderFault")
	eq(t, "InvalidParameterValue", *failed["toolong"].Code, "toolong code")
	eq(t, "One or more parameters cannot be validated. Reason: Message must be shorter than 1024 bytes.", *failed["toolong"].Message, "toolong message")
	jsonEq(t, []string{"also fine", "fine"}, bodies(s.receive(url)), "what was sent")
}

func TestBatchRequestsFailAsAWhole(t *testing.T) {
	s := newSuite(t)
	_, url := s.create("batchreq", nil)
	batch := func(entries ...types.SendMessageBatchRequestEntry) error {
		if entries == nil {
			entries = []types.SendMessageBatchRequestEntry{} // sent as [] (nil fails the SDK's own validation)
		}
		_, err := s.c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries})
		return err
	}
	entry := func(id, body string) types.SendMessageBatchRequestEntry {
		return types.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String(body)}
	}
	var empty *types.EmptyBatchRequest
	expectError(t, batch(), &empty, "AWS.SimpleQueueService.EmptyBatchRequest", 400, "")
	var eleven []types.SendMessageBatchRequestEntry
	for i := 0; i < 11; i++ {
		eleven = append(eleven, entry("m"+string(rune('a'+i)), "x"))
	}
	var tooMany *types.TooManyEntriesInBatchRequest
	expectError(t, batch(eleven...), &tooMany, "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", 400,
		"Maximum number of entries per request are 10. You have sent 11.")
	var notDistinct *types.BatchEntryIdsNotDistinct
	expectError(t, batch(entry("a", "x"), entry("a", "y")), &notDistinct, "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", 400, "")
	var badID *types.InvalidBatchEntryId
	expectError(t, batch(entry("bad id!", "x")), &badID, "AWS.SimpleQueueService.InvalidBatchEntryId", 400,
		"A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.")
	big := strings.Repeat("z", 262144)
	var tooLong *types.BatchRequestTooLong
	expectError(t, batch(entry("b1", big), entry("b2", big), entry("b3", big), entry("b4", big), entry("b5", "z")), &tooLong,
		"AWS.SimpleQueueService.BatchRequestTooLong", 400, "Batch requests cannot be longer than 1048576 bytes. You have sent 1048577 bytes.")
	_, err := s.c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: []types.DeleteMessageBatchRequestEntry{}})
	expectError(t, err, &empty, "AWS.SimpleQueueService.EmptyBatchRequest", 400, "")
	eq(t, [3]string{"0", "0", "0"}, s.counts(url), "nothing sent")
}

func TestReceiveValidatesAndHonoursMaxNumberOfMessages(t *testing.T) {
	s := newSuite(t)
	_, url := s.create("recvmax", nil)
	eq(t, 0, len(s.receive(url)), "empty")
	var entries []types.SendMessageBatchRequestEntry
	for i := 0; i < 10; i++ {
		entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String("e" + string(rune('0'+i))), MessageBody: aws.String("m")})
	}
	must(s.c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries}))
	eq(t, 3, len(must(s.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 3})).Messages), "3")
	eq(t, 1, len(must(s.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url})).Messages), "default 1")
	eq(t, 6, len(s.receive(url)), "the rest")
	_, err := s.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 11})
	expectError(t, err, nil, "InvalidParameterValue", 400,
		"Value 11 for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.")
	_, err = s.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 21})
	expectError(t, err, nil, "InvalidParameterValue", 400,
		"Value 21 for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.")
}

func TestVisibilityTimeoutAndChanges(t *testing.T) {
	s := newSuite(t)
	_, url := s.create("vis", nil)
	s.send(url, "again")
	count := []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount}
	first := must(s.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MessageSystemAttributeNames: count})).Messages[0]
	eq(t, "1", first.Attributes["ApproximateReceiveCount"], "first receive")
	eq(t, 0, len(s.receive(url)), "hidden")
	advance(t, 31)
	second := must(s.c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MessageSystemAttributeNames: count})).Messages[0]
	eq(t, *first.MessageId, *second.MessageId, "redelivered")
	truth(t, *first.ReceiptHandle != *second.ReceiptHandle, "a new receipt handle")
	eq(t, "2", second.Attributes["ApproximateReceiveCount"], "second receive")
	must(s.c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: second.ReceiptHandle, VisibilityTimeout: 100}))
	advance(t, 99)
	eq(t, 0, len(s.receive(url)), "still hidden 99 s after the change")
	advance(t, 2)
	third := s.receive(url)[0]
	_, err := s.c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: third.ReceiptHandle, VisibilityTimeout: 43201})
	expectError(t, err, nil, "InvalidParameterValue", 400, "")
	_, err = s.c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: aws.String("garbage"), VisibilityTimeout: 10})
	var invalid *types.ReceiptHandleIsInvalid
	expectError(t, err, &invalid, "ReceiptHandleIsInvalid", 404, "")
	s.send(url, "other")
	ms := s.receive(url)
	eq(t, 1, len(ms), "one more")
	out := must(s.c.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &url,
		Entries: []types.ChangeMessageVisibilityBatchRequestEntry{
			{Id: aws.String("show"), ReceiptHandle: third.ReceiptHandle, VisibilityTimeout: 0},
			{Id: aws.String("hide"), ReceiptHandle: ms[0].ReceiptHandle, VisibilityTimeout: 600},
			{Id: aws.String("bad"), ReceiptHandle: aws.String("garbage")},
		}}))
	eq(t, 2, len(out.Successful), "two changed")
	eq(t, 1, len(out.Failed), "one failed")
	eq(t, "bad", *out.Failed[0].Id, "failed id")
	eq(t, "ReceiptHandleIsInvalid", *out.Failed[0].Code, "failed code")
	truth(t, out.Failed[0].SenderFault, "SenderFault")
	jsonEq(t, []string{"again"}, bodies(s.receive(url)), "visible at once with 0")
}

func TestDeleteAndDeleteBatch(t *testing.T) {
	s := newSuite(t)
	_, url := s.create("del", nil)
	_, otherURL := s.create("del-other", nil)
	for _, b := range []string{"m0", "m1", "m2"} {
		s.send(url, b)
	}
	ms := s.receive(url)
	eq(t, 3, len(ms), "three")
	must(s.c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: ms[0].ReceiptHandle}))
	must(s.c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: ms[0].ReceiptHandle}))
	var invalid *types.ReceiptHandleIsInvalid
	_, err := s.c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: aws.String("garbage")})
	expectError(t, err, &invalid, "ReceiptHandleIsInvalid", 404, "")
	_, err = s.c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &otherURL, ReceiptHandle: ms[1].ReceiptHandle})
	expectError(t, err, &invalid, "ReceiptHandleIsInvalid", 404, "")
	out := must(s.c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: []types.DeleteMessageBatchRequestEntry{
		{Id: aws.String("one"), ReceiptHandle: ms[1].ReceiptHandle},
		{Id: aws.String("two"), ReceiptHandle: ms[2].ReceiptHandle},
		{Id: aws.String("bad"), ReceiptHandle: aws.String("garbage")},
	}}))
	eq(t, 2, len(out.Successful), "two deleted")
	eq(t, "ReceiptHandleIsInvalid", *out.Failed[0].Code, "the bad one")
	advance(t, 31)
	eq(t, 0, len(s.receive(url)), "deleted for good")
}
