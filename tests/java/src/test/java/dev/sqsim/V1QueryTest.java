package dev.sqsim;

import static dev.sqsim.Sqsim.ACCOUNT;
import static dev.sqsim.Sqsim.TRICKY_BODY;
import static dev.sqsim.Sqsim.md5Hex;
import static dev.sqsim.Sqsim.uniqueName;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.amazonaws.AmazonServiceException;
import com.amazonaws.ClientConfiguration;
import com.amazonaws.Request;
import com.amazonaws.Response;
import com.amazonaws.auth.AWSStaticCredentialsProvider;
import com.amazonaws.auth.BasicAWSCredentials;
import com.amazonaws.client.builder.AwsClientBuilder.EndpointConfiguration;
import com.amazonaws.handlers.RequestHandler2;
import com.amazonaws.services.sqs.AmazonSQS;
import com.amazonaws.services.sqs.AmazonSQSAsync;
import com.amazonaws.services.sqs.AmazonSQSAsyncClientBuilder;
import com.amazonaws.services.sqs.AmazonSQSClientBuilder;
import com.amazonaws.services.sqs.buffered.AmazonSQSBufferedAsyncClient;
import com.amazonaws.services.sqs.buffered.QueueBufferConfig;
import com.amazonaws.services.sqs.model.*;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.function.Executable;

/**
 * The query protocol through the AWS SDK for Java v1 at 1.12.583, the last v1 release whose SQS
 * client sends form-encoded `Action=…` requests and reads XML (1.12.584 switched it to AWS
 * JSON): the matrix's core (queues, every attribute type, batches, receives, visibility,
 * deletes, FIFO, dead letters and move tasks, long polls, typed exceptions with their codes and
 * statuses) with the SDK's MD5 checks on (MessageMD5ChecksumHandler, its default), and its
 * AmazonSQSBufferedAsyncClient under concurrent load. Every request is checked to be a query
 * request and every answer XML, so the suite cannot pass on the JSON protocol unnoticed.
 */
@ExtendWith(Sqsim.class)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class V1QueryTest {
  Sqsim server;
  AmazonSQS sqs;
  final Protocol protocol = new Protocol();

  /** Checks the wire protocol of every call and counts them by Action. */
  static final class Protocol extends RequestHandler2 {
    final Map<String, AtomicInteger> actions = new ConcurrentHashMap<>();
    final List<String> violations = java.util.Collections.synchronizedList(new ArrayList<>());

    @Override
    public void beforeRequest(Request<?> request) {
      List<String> action = request.getParameters().get("Action");
      if (action == null || action.size() != 1) violations.add("no Action parameter: " + request);
      else actions.computeIfAbsent(action.get(0), k -> new AtomicInteger()).incrementAndGet();
      if (request.getHeaders().containsKey("X-Amz-Target")) violations.add("X-Amz-Target sent: " + request);
    }

    @Override
    public void afterResponse(Request<?> request, Response<?> response) {
      String type = response.getHttpResponse().getHeaders().getOrDefault("Content-Type", "");
      if (!type.contains("xml")) violations.add("a non-XML answer (" + type + ") to " + request.getParameters().get("Action"));
    }

    int count(String action) {
      AtomicInteger n = actions.get(action);
      return n == null ? 0 : n.get();
    }
  }

  static ClientConfiguration config() {
    return new ClientConfiguration().withMaxErrorRetry(0).withSocketTimeout(60_000);
  }

  AmazonSQS client(RequestHandler2 handler) {
    return AmazonSQSClientBuilder.standard()
        .withEndpointConfiguration(new EndpointConfiguration(server.endpoint, Sqsim.REGION))
        .withCredentials(new AWSStaticCredentialsProvider(new BasicAWSCredentials("AKIDTEST", "test-secret")))
        .withClientConfiguration(config())
        .withRequestHandlers(handler)
        .build();
  }

  @BeforeAll
  void start() {
    server = Sqsim.server();
    sqs = client(protocol);
  }

  @AfterAll
  void checkProtocol() {
    sqs.shutdown();
    assertEquals(List.of(), protocol.violations, "every call spoke the query protocol");
    assertTrue(protocol.actions.size() >= 15, "actions used: " + protocol.actions.keySet());
  }

  record Q(String name, String url) {}

  Q create(String prefix, Map<String, String> attrs) {
    String name = uniqueName(prefix);
    return new Q(name, sqs.createQueue(new CreateQueueRequest(name).withAttributes(attrs)).getQueueUrl());
  }

  Map<String, String> attrs(String url, String... names) {
    return sqs.getQueueAttributes(new GetQueueAttributesRequest(url).withAttributeNames(names.length == 0 ? new String[] {"All"} : names))
        .getAttributes();
  }

  List<Message> receive(String url) {
    return sqs.receiveMessage(new ReceiveMessageRequest(url).withMaxNumberOfMessages(10)).getMessages();
  }

  static MessageAttributeValue str(String type, String v) {
    return new MessageAttributeValue().withDataType(type).withStringValue(v);
  }

  static MessageAttributeValue bin(String type, byte[] v) {
    return new MessageAttributeValue().withDataType(type).withBinaryValue(ByteBuffer.wrap(v));
  }

  static String md5OfAttributes(Map<String, MessageAttributeValue> attrs) {
    Map<String, Sqsim.Attr> neutral = new LinkedHashMap<>();
    attrs.forEach((k, v) -> {
      if (v.getBinaryValue() != null) {
        ByteBuffer b = v.getBinaryValue().duplicate();
        byte[] bytes = new byte[b.remaining()];
        b.get(bytes);
        neutral.put(k, Sqsim.Attr.bin(v.getDataType(), bytes));
      } else {
        neutral.put(k, Sqsim.Attr.str(v.getDataType(), v.getStringValue()));
      }
    });
    return Sqsim.md5OfAttributes(neutral);
  }

  /** The call fails with exactly `type`, the query error code, the status and a Client error type. */
  static <T extends AmazonServiceException> T assertQueryError(Class<T> type, String code, int status, String message, Executable call) {
    T e = assertThrows(type, call);
    String seen = e.getClass().getSimpleName() + " / " + e.getErrorCode() + " / " + e.getStatusCode() + ": " + e.getErrorMessage();
    assertEquals(type, e.getClass(), "exception class (" + seen + ")");
    assertEquals(code, e.getErrorCode(), "error code (" + seen + ")");
    assertEquals(status, e.getStatusCode(), "HTTP status (" + seen + ")");
    assertEquals(AmazonServiceException.ErrorType.Client, e.getErrorType(), "error type (" + seen + ")");
    assertNotNull(e.getRequestId(), "RequestId (" + seen + ")");
    if (message != null) assertEquals(message, e.getErrorMessage(), "message (" + seen + ")");
    return e;
  }

  static void assertNotNull(Object o, String what) {
    assertTrue(o != null && !o.toString().isEmpty(), what);
  }

  @Test
  void queuesAttributesTagsAndErrors() {
    Q q = create("v1q", Map.of("VisibilityTimeout", "45", "DelaySeconds", "2"));
    assertEquals(server.queueUrl(q.name), q.url);
    assertEquals(q.url, sqs.getQueueUrl(q.name).getQueueUrl());
    Map<String, String> a = attrs(q.url);
    assertEquals("45", a.get("VisibilityTimeout"));
    assertEquals("2", a.get("DelaySeconds"));
    assertEquals(Sqsim.arn(q.name), a.get("QueueArn"));
    assertEquals(12, a.size(), "All on a standard queue: " + new TreeMap<>(a).keySet());
    assertTrue(a.get("CreatedTimestamp").matches("\\d{10}"), a.get("CreatedTimestamp"));
    assertTrue(sqs.listQueues(q.name).getQueueUrls().contains(q.url));
    assertQueryError(QueueNameExistsException.class, "QueueAlreadyExists", 400, null,
        () -> sqs.createQueue(new CreateQueueRequest(q.name).withAttributes(Map.of("DelaySeconds", "3"))));
    assertQueryError(QueueDoesNotExistException.class, "AWS.SimpleQueueService.NonExistentQueue", 400,
        // The query protocol's wording (sqs-reference §12: AWS's recorded XML error).
        "The specified queue does not exist for this wsdl version.", () -> sqs.getQueueUrl(uniqueName("missing")));
    assertQueryError(InvalidAttributeNameException.class, "InvalidAttributeName", 400, "Unknown Attribute Foobar.",
        () -> sqs.getQueueAttributes(new GetQueueAttributesRequest(q.url).withAttributeNames("Foobar")));
    assertQueryError(AmazonSQSException.class, "InvalidAttributeValue", 400, "Invalid value for the parameter VisibilityTimeout.",
        () -> sqs.setQueueAttributes(q.url, Map.of("VisibilityTimeout", "43201")));
    assertQueryError(AmazonSQSException.class, "InvalidParameterValue", 400, null, () -> sqs.createQueue("has space"));

    String tagged = uniqueName("v1tags");
    String turl = sqs.createQueue(new CreateQueueRequest(tagged).withTags(Map.of("team", "core"))).getQueueUrl();
    sqs.tagQueue(turl, Map.of("env", "test"));
    assertEquals(Map.of("team", "core", "env", "test"), sqs.listQueueTags(turl).getTags());
    sqs.untagQueue(turl, List.of("team"));
    assertEquals(Map.of("env", "test"), sqs.listQueueTags(turl).getTags());

    ListQueuesResult page = sqs.listQueues(new ListQueuesRequest("v1").withMaxResults(1));
    assertEquals(1, page.getQueueUrls().size());
    assertNotNull(page.getNextToken(), "NextToken");
  }

  @Test
  void sendEveryAttributeTypeWithDigests() {
    Q q = create("v1send", Map.of());
    Map<String, MessageAttributeValue> ma = new LinkedHashMap<>();
    ma.put("Str", str("String", "quote \" cr \r nl \n ünïcødé 😀 <xml> & amp"));
    ma.put("Num", str("Number", "-12345.678e3"));
    ma.put("Num.custom", str("Number.int", "42"));
    ma.put("Bin", bin("Binary", Sqsim.NON_UTF8));
    ma.put("Bin.gif", bin("Binary.gif", "GIF89a".getBytes(StandardCharsets.US_ASCII)));
    ma.put("attr.1øßä", str("String.label", "x"));
    String trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
    SendMessageResult sent = sqs.sendMessage(new SendMessageRequest(q.url, TRICKY_BODY).withMessageAttributes(ma)
        .withMessageSystemAttributes(Map.of("AWSTraceHeader", new MessageSystemAttributeValue().withDataType("String").withStringValue(trace))));
    assertEquals(md5Hex(TRICKY_BODY), sent.getMD5OfMessageBody());
    assertEquals(md5OfAttributes(ma), sent.getMD5OfMessageAttributes());
    assertEquals("5ae4d5d7636402d80f4eb6d213245a88", sent.getMD5OfMessageSystemAttributes());
    assertNull(sent.getSequenceNumber());

    long now = server.nowMs();
    Message m = sqs.receiveMessage(new ReceiveMessageRequest(q.url).withMessageAttributeNames("All").withAttributeNames("All"))
        .getMessages().get(0);
    assertEquals(sent.getMessageId(), m.getMessageId());
    assertEquals(TRICKY_BODY, m.getBody(), "CR, CRLF and astral characters survive the XML");
    assertEquals(sent.getMD5OfMessageBody(), m.getMD5OfBody());
    assertEquals(sent.getMD5OfMessageAttributes(), m.getMD5OfMessageAttributes());
    assertEquals(ma.keySet(), m.getMessageAttributes().keySet());
    ByteBuffer b = m.getMessageAttributes().get("Bin").getBinaryValue();
    byte[] got = new byte[b.remaining()];
    b.get(got);
    assertArrayEquals(Sqsim.NON_UTF8, got, "non-UTF-8 bytes intact");
    assertEquals("-12345.678e3", m.getMessageAttributes().get("Num").getStringValue());
    assertEquals(ma.get("Str").getStringValue(), m.getMessageAttributes().get("Str").getStringValue());
    assertEquals(trace, m.getAttributes().get("AWSTraceHeader"));
    assertEquals(ACCOUNT, m.getAttributes().get("SenderId"));
    assertEquals("1", m.getAttributes().get("ApproximateReceiveCount"));
    assertTrue(Math.abs(Long.parseLong(m.getAttributes().get("SentTimestamp")) - now) < 5000);

    SendMessageResult vector = sqs.sendMessage(new SendMessageRequest(q.url, "hello")
        .withMessageAttributes(Map.of("timestamp", str("Number", "1493147359900"))));
    assertEquals("5d41402abc4b2a76b9719d911017c592", vector.getMD5OfMessageBody());
    assertEquals("235c5c510d26fb653d073faed50ae77c", vector.getMD5OfMessageAttributes());

    assertQueryError(InvalidMessageContentsException.class, "InvalidMessageContents", 400, null,
        () -> sqs.sendMessage(q.url, "nul \u0001 here"));
    assertQueryError(AmazonSQSException.class, "InvalidParameterValue", 400, null,
        () -> sqs.sendMessage(new SendMessageRequest(q.url, "x").withDelaySeconds(901)));
  }

  @Test
  void batchesWithPartialFailuresAndTypedErrors() {
    Q q = create("v1batch", Map.of("MaximumMessageSize", "1024"));
    SendMessageBatchResult out = sqs.sendMessageBatch(q.url, List.of(
        new SendMessageBatchRequestEntry("ok1", "fine"),
        new SendMessageBatchRequestEntry("badchars", "bad \u0001 char"),
        new SendMessageBatchRequestEntry("toolong", "y".repeat(1025)),
        new SendMessageBatchRequestEntry("ok2", "also fine").withMessageAttributes(Map.of("Foo", str("String", "Bar")))));
    assertEquals(Set.of("ok1", "ok2"), out.getSuccessful().stream().map(SendMessageBatchResultEntry::getId).collect(Collectors.toSet()));
    Map<String, BatchResultErrorEntry> failed = out.getFailed().stream().collect(Collectors.toMap(BatchResultErrorEntry::getId, e -> e));
    assertEquals("InvalidMessageContents", failed.get("badchars").getCode());
    assertTrue(failed.get("badchars").getSenderFault());
    assertEquals("InvalidParameterValue", failed.get("toolong").getCode());
    assertEquals("One or more parameters cannot be validated. Reason: Message must be shorter than 1024 bytes.",
        failed.get("toolong").getMessage());
    SendMessageBatchResultEntry ok2 = out.getSuccessful().stream().filter(e -> e.getId().equals("ok2")).findFirst().orElseThrow();
    assertEquals("ae7155c6026991b6d54b11589678bf9c", ok2.getMD5OfMessageAttributes());

    assertQueryError(EmptyBatchRequestException.class, "AWS.SimpleQueueService.EmptyBatchRequest", 400, null,
        () -> sqs.sendMessageBatch(new SendMessageBatchRequest(q.url)));
    assertQueryError(TooManyEntriesInBatchRequestException.class, "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", 400,
        "Maximum number of entries per request are 10. You have sent 11.",
        () -> sqs.sendMessageBatch(q.url, IntStream.range(0, 11).mapToObj(i -> new SendMessageBatchRequestEntry("m" + i, "x")).toList()));
    assertQueryError(BatchEntryIdsNotDistinctException.class, "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", 400, null,
        () -> sqs.sendMessageBatch(q.url, List.of(new SendMessageBatchRequestEntry("a", "x"), new SendMessageBatchRequestEntry("a", "y"))));
    assertQueryError(InvalidBatchEntryIdException.class, "AWS.SimpleQueueService.InvalidBatchEntryId", 400, null,
        () -> sqs.sendMessageBatch(q.url, List.of(new SendMessageBatchRequestEntry("bad id!", "x"))));

    List<Message> ms = receive(q.url);
    assertEquals(List.of("also fine", "fine"), ms.stream().map(Message::getBody).sorted().toList());
    ChangeMessageVisibilityBatchResult cv = sqs.changeMessageVisibilityBatch(q.url, List.of(
        new ChangeMessageVisibilityBatchRequestEntry("show", ms.get(0).getReceiptHandle()).withVisibilityTimeout(0),
        new ChangeMessageVisibilityBatchRequestEntry("bad", "garbage").withVisibilityTimeout(0)));
    assertEquals(List.of("show"), cv.getSuccessful().stream().map(ChangeMessageVisibilityBatchResultEntry::getId).toList());
    assertEquals("ReceiptHandleIsInvalid", cv.getFailed().get(0).getCode());
    List<Message> again = receive(q.url);
    assertEquals(List.of(ms.get(0).getMessageId()), again.stream().map(Message::getMessageId).toList());
    DeleteMessageBatchResult del = sqs.deleteMessageBatch(q.url, List.of(
        new DeleteMessageBatchRequestEntry("a", again.get(0).getReceiptHandle()),
        new DeleteMessageBatchRequestEntry("b", ms.get(1).getReceiptHandle()),
        new DeleteMessageBatchRequestEntry("c", "garbage")));
    assertEquals(List.of("a", "b"), del.getSuccessful().stream().map(DeleteMessageBatchResultEntry::getId).sorted().toList());
    assertEquals("ReceiptHandleIsInvalid", del.getFailed().get(0).getCode());
    assertTrue(del.getFailed().get(0).getSenderFault());
  }

  @Test
  void visibilityDeletesAndPurge() {
    server.freeze(true);
    try {
      Q q = create("v1vis", Map.of());
      sqs.sendMessage(q.url, "again");
      Message first = receive(q.url).get(0);
      assertTrue(receive(q.url).isEmpty());
      server.advance(31);
      Message second = receive(q.url).get(0);
      assertEquals(first.getMessageId(), second.getMessageId());
      assertNotEquals(first.getReceiptHandle(), second.getReceiptHandle());
      sqs.changeMessageVisibility(q.url, second.getReceiptHandle(), 100);
      server.advance(99);
      assertTrue(receive(q.url).isEmpty());
      server.advance(2);
      Message third = receive(q.url).get(0);
      assertQueryError(AmazonSQSException.class, "InvalidParameterValue", 400, null,
          () -> sqs.changeMessageVisibility(q.url, third.getReceiptHandle(), 43201));
      assertQueryError(ReceiptHandleIsInvalidException.class, "ReceiptHandleIsInvalid", 404, null,
          () -> sqs.deleteMessage(q.url, "garbage"));
      sqs.deleteMessage(q.url, third.getReceiptHandle());
      sqs.deleteMessage(q.url, third.getReceiptHandle());
      sqs.sendMessage(q.url, "purged");
      sqs.purgeQueue(new PurgeQueueRequest(q.url));
      assertQueryError(PurgeQueueInProgressException.class, "AWS.SimpleQueueService.PurgeQueueInProgress", 403, null,
          () -> sqs.purgeQueue(new PurgeQueueRequest(q.url)));
      sqs.deleteQueue(q.url);
      assertQueryError(QueueDeletedRecentlyException.class, "AWS.SimpleQueueService.QueueDeletedRecently", 400, null,
          () -> sqs.createQueue(q.name));
      assertQueryError(QueueDoesNotExistException.class, "AWS.SimpleQueueService.NonExistentQueue", 400, null,
          () -> sqs.sendMessage(q.url, "x"));
    } finally {
      server.freeze(false);
    }
  }

  @Test
  void longPollWakesOnSendAndTimesOutEmpty() throws Exception {
    Q q = create("v1poll", Map.of());
    AmazonSQS other = client(protocol);
    try {
      long t = System.nanoTime();
      assertTrue(sqs.receiveMessage(new ReceiveMessageRequest(q.url).withWaitTimeSeconds(1)).getMessages().isEmpty());
      long ms = (System.nanoTime() - t) / 1_000_000;
      assertTrue(ms >= 900 && ms < 5000, "an empty 1 s long poll took " + ms + " ms");
      t = System.nanoTime();
      var pending = java.util.concurrent.CompletableFuture.supplyAsync(
          () -> sqs.receiveMessage(new ReceiveMessageRequest(q.url).withWaitTimeSeconds(20)).getMessages());
      Thread.sleep(500);
      other.sendMessage(q.url, "wake up");
      List<Message> got = pending.get(10, TimeUnit.SECONDS);
      ms = (System.nanoTime() - t) / 1_000_000;
      assertEquals(List.of("wake up"), got.stream().map(Message::getBody).toList());
      assertTrue(ms >= 400 && ms < 5000, "woke after " + ms + " ms");
    } finally {
      other.shutdown();
    }
  }

  @Test
  void fifoOrderAndDeduplication() {
    String name = uniqueName("v1fifo") + ".fifo";
    String url = sqs.createQueue(new CreateQueueRequest(name).withAttributes(Map.of("FifoQueue", "true", "ContentBasedDeduplication", "true")))
        .getQueueUrl();
    List<String> seqs = new ArrayList<>();
    List<String> ids = new ArrayList<>();
    for (String body : List.of("g1-a", "g1-b", "g1-c")) {
      SendMessageResult r = sqs.sendMessage(new SendMessageRequest(url, body).withMessageGroupId("g1"));
      assertTrue(r.getSequenceNumber().matches("\\d{20}"), r.getSequenceNumber());
      seqs.add(r.getSequenceNumber());
      ids.add(r.getMessageId());
    }
    assertEquals(seqs.stream().sorted().toList(), seqs, "increasing SequenceNumbers");
    SendMessageResult dup = sqs.sendMessage(new SendMessageRequest(url, "g1-a").withMessageGroupId("g1"));
    assertEquals(ids.get(0), dup.getMessageId(), "a duplicate answers with the original's MessageId");
    assertEquals(3, Integer.parseInt(attrs(url, "ApproximateNumberOfMessages").get("ApproximateNumberOfMessages")),
        "the duplicate enqueued nothing");
    List<Message> ms = sqs.receiveMessage(new ReceiveMessageRequest(url).withMaxNumberOfMessages(10).withAttributeNames("All")).getMessages();
    assertEquals(List.of("g1-a", "g1-b", "g1-c"), ms.stream().map(Message::getBody).toList());
    assertEquals("g1", ms.get(0).getAttributes().get("MessageGroupId"));
    assertEquals(Sqsim.sha256Hex("g1-a"), ms.get(0).getAttributes().get("MessageDeduplicationId"));
    assertEquals(seqs.get(0), ms.get(0).getAttributes().get("SequenceNumber"));
    assertQueryError(AmazonSQSException.class, "MissingParameter", 400, "The request must contain the parameter MessageGroupId.",
        () -> sqs.sendMessage(url, "no group"));
  }

  @Test
  void deadLettersAndMoveTasks() throws Exception {
    Q dlq = create("v1dlq", Map.of());
    String dlqArn = Sqsim.arn(dlq.name);
    Q src = create("v1src", Map.of("RedrivePolicy", "{\"deadLetterTargetArn\":\"" + dlqArn + "\",\"maxReceiveCount\":1}"));
    String id = sqs.sendMessage(src.url, "poison").getMessageId();
    Message m = receive(src.url).get(0);
    sqs.changeMessageVisibility(src.url, m.getReceiptHandle(), 0);
    assertTrue(receive(src.url).isEmpty(), "the second receive dead-letters it");
    assertEquals(List.of(src.url), sqs.listDeadLetterSourceQueues(new ListDeadLetterSourceQueuesRequest(dlq.url)).getQueueUrls());
    assertEquals("1", attrs(dlq.url, "ApproximateNumberOfMessages").get("ApproximateNumberOfMessages"));

    assertQueryError(ResourceNotFoundException.class, "ResourceNotFoundException", 404, null,
        () -> sqs.startMessageMoveTask(new StartMessageMoveTaskRequest().withSourceArn(Sqsim.arn(uniqueName("ghost")))));
    String handle = sqs.startMessageMoveTask(new StartMessageMoveTaskRequest().withSourceArn(dlqArn)).getTaskHandle();
    assertNotNull(handle, "TaskHandle");
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    ListMessageMoveTasksResultEntry task;
    while (true) {
      task = sqs.listMessageMoveTasks(new ListMessageMoveTasksRequest().withSourceArn(dlqArn)).getResults().get(0);
      if (task.getStatus().equals("COMPLETED")) break;
      if (System.nanoTime() > deadline) fail("move task never completed: " + task);
      Thread.sleep(10);
    }
    assertEquals(1L, task.getApproximateNumberOfMessagesMoved());
    assertTrue(task.getStartedTimestamp() > 1_000_000_000_000L, "StartedTimestamp in epoch ms: " + task.getStartedTimestamp());
    assertEquals(id, receive(src.url).get(0).getMessageId(), "back in its source queue");
  }

  /**
   * AmazonSQSBufferedAsyncClient: concurrent sends, buffered (prefetched) receives and batched
   * deletes; every message received exactly once and the calls batched.
   */
  @Test
  void bufferedAsyncClientUnderConcurrentLoad() throws Exception {
    Protocol counted = new Protocol();
    AmazonSQSAsync async = AmazonSQSAsyncClientBuilder.standard()
        .withEndpointConfiguration(new EndpointConfiguration(server.endpoint, Sqsim.REGION))
        .withCredentials(new AWSStaticCredentialsProvider(new BasicAWSCredentials("AKIDTEST", "test-secret")))
        .withClientConfiguration(config().withMaxConnections(32))
        .withRequestHandlers(counted)
        .build();
    AmazonSQSBufferedAsyncClient buffered = new AmazonSQSBufferedAsyncClient(async,
        new QueueBufferConfig().withMaxBatchOpenMs(50).withMaxInflightReceiveBatches(4).withMaxDoneReceiveBatches(4).withLongPoll(true)
            .withLongPollWaitTimeoutSeconds(1));
    try {
      Q q = create("v1buffered", Map.of("VisibilityTimeout", "600"));
      int total = 400;
      List<Future<SendMessageResult>> sends = new ArrayList<>();
      for (int i = 0; i < total; i++) {
        sends.add(buffered.sendMessageAsync(new SendMessageRequest(q.url, "msg-" + i)
            .withMessageAttributes(Map.of("n", str("Number", Integer.toString(i))))));
      }
      Set<String> ids = ConcurrentHashMap.newKeySet();
      for (int i = 0; i < total; i++) {
        SendMessageResult r = sends.get(i).get(30, TimeUnit.SECONDS);
        assertEquals(md5Hex("msg-" + i), r.getMD5OfMessageBody());
        ids.add(r.getMessageId());
      }
      assertEquals(total, ids.size(), "distinct MessageIds");

      Map<String, String> seen = new ConcurrentHashMap<>();
      AtomicInteger duplicates = new AtomicInteger();
      List<Future<DeleteMessageResult>> deletes = java.util.Collections.synchronizedList(new ArrayList<>());
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      var consumers = IntStream.range(0, 4).mapToObj(c -> java.util.concurrent.CompletableFuture.runAsync(() -> {
        while (seen.size() < total && System.nanoTime() < deadline) {
          for (Message m : buffered.receiveMessage(new ReceiveMessageRequest(q.url).withMaxNumberOfMessages(10)).getMessages()) {
            if (seen.put(m.getBody(), m.getMessageId()) != null) duplicates.incrementAndGet();
            deletes.add(buffered.deleteMessageAsync(new DeleteMessageRequest(q.url, m.getReceiptHandle())));
          }
        }
      })).toList();
      for (var c : consumers) c.get(90, TimeUnit.SECONDS);
      for (Future<DeleteMessageResult> d : new ArrayList<>(deletes)) d.get(30, TimeUnit.SECONDS);
      assertEquals(0, duplicates.get(), "no message delivered twice");
      assertEquals(total, seen.size(), "every message received");
      assertEquals(ids, Set.copyOf(seen.values()));
      Map<String, String> a = attrs(q.url, "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible");
      assertEquals("0", a.get("ApproximateNumberOfMessages"), a.toString());
      assertEquals("0", a.get("ApproximateNumberOfMessagesNotVisible"), a.toString());
      assertEquals(List.of(), counted.violations, "the buffered client spoke the query protocol");
      assertEquals(0, counted.count("SendMessage"), "sends went out batched: " + counted.actions);
      assertEquals(0, counted.count("DeleteMessage"), "deletes went out batched: " + counted.actions);
      assertTrue(counted.count("SendMessageBatch") >= total / 10 && counted.count("SendMessageBatch") < total / 2,
          "SendMessageBatch calls: " + counted.actions);
      assertTrue(counted.count("DeleteMessageBatch") < total / 2, "DeleteMessageBatch calls: " + counted.actions);
    } finally {
      buffered.shutdown();
    }
  }
}
