package dev.sqsim;

import static dev.sqsim.Sqsim.ACCOUNT;
import static dev.sqsim.Sqsim.REGION;
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

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.function.Predicate;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.function.Executable;
import software.amazon.awssdk.core.SdkBytes;
import software.amazon.awssdk.services.sqs.SqsClient;
import software.amazon.awssdk.services.sqs.model.*;

/**
 * The SQS behaviour matrix of the SDK suites (tests/node/suite.mjs, tests/python), run through
 * the AWS SDK for Java v2: by V2SyncTest on the sync client and by V2AsyncTest on the async
 * (Netty) client (through a proxy that joins its futures). The SDK's MD5 checks are left on
 * (its default), so every send and receive below is also checked by the SDK itself. Expected
 * values come from /work/shared/sqs-reference.md, as the other suites' do.
 */
@ExtendWith(Sqsim.class)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class V2Matrix {
  protected Sqsim server;
  protected SqsClient sqs;
  protected SqsClient other;

  /** A client of the family under test (a new one each call: "another process"). */
  protected abstract SqsClient newClient();

  /** Every queue URL with `prefix`, through the SDK's ListQueues paginator. */
  protected abstract List<String> paginateQueues(String prefix, int pageSize);

  /** Every dead-letter source of `dlqUrl`, through the SDK's ListDeadLetterSourceQueues paginator. */
  protected abstract List<String> paginateDeadLetterSources(String dlqUrl, int pageSize);

  @BeforeAll
  void clients() {
    server = Sqsim.server();
    sqs = newClient();
    other = newClient();
  }

  @AfterAll
  void closeClients() {
    sqs.close();
    other.close();
  }

  // ---- helpers ----------------------------------------------------------------------------

  record Q(String name, String url) {}

  Q create(String prefix, Map<String, String> attributes) {
    String name = uniqueName(prefix);
    String url = sqs.createQueue(b -> b.queueName(name).attributesWithStrings(attributes)).queueUrl();
    return new Q(name, url);
  }

  Q create(String prefix) {
    return create(prefix, Map.of());
  }

  Q fifo(String prefix, Map<String, String> extra) {
    Map<String, String> a = new TreeMap<>(extra);
    a.put("FifoQueue", "true");
    String name = uniqueName(prefix) + ".fifo";
    return new Q(name, sqs.createQueue(b -> b.queueName(name).attributesWithStrings(a)).queueUrl());
  }

  Map<String, String> attrs(String url, String... names) {
    return sqs.getQueueAttributes(b -> b.queueUrl(url).attributeNamesWithStrings(names.length == 0 ? new String[] {"All"} : names))
        .attributesAsStrings();
  }

  List<Integer> counts(String url) {
    Map<String, String> a = attrs(url, "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed");
    return List.of(Integer.parseInt(a.get("ApproximateNumberOfMessages")),
        Integer.parseInt(a.get("ApproximateNumberOfMessagesNotVisible")),
        Integer.parseInt(a.get("ApproximateNumberOfMessagesDelayed")));
  }

  List<Message> receive(String url) {
    return sqs.receiveMessage(b -> b.queueUrl(url).maxNumberOfMessages(10)).messages();
  }

  List<Message> receiveAndDelete(String url) {
    List<Message> ms = receive(url);
    for (Message m : ms) sqs.deleteMessage(b -> b.queueUrl(url).receiptHandle(m.receiptHandle()));
    return ms;
  }

  List<String> bodies(List<Message> ms) {
    return ms.stream().map(Message::body).sorted().collect(Collectors.toList());
  }

  static MessageAttributeValue str(String type, String v) {
    return MessageAttributeValue.builder().dataType(type).stringValue(v).build();
  }

  static MessageAttributeValue bin(String type, byte[] v) {
    return MessageAttributeValue.builder().dataType(type).binaryValue(SdkBytes.fromByteArray(v)).build();
  }

  static String md5OfAttributes(Map<String, MessageAttributeValue> attrs) {
    Map<String, Sqsim.Attr> neutral = new LinkedHashMap<>();
    attrs.forEach((k, v) -> neutral.put(k, v.binaryValue() != null
        ? Sqsim.Attr.bin(v.dataType(), v.binaryValue().asByteArray())
        : Sqsim.Attr.str(v.dataType(), v.stringValue())));
    return Sqsim.md5OfAttributes(neutral);
  }

  /**
   * The call fails with exactly `type` (SqsException itself for errors the model has no class
   * for), the query error code (x-amzn-query-error, which the SDK's awsQueryCompatible support
   * reads) and the HTTP status; `message` (if not null) is AWS's message text.
   */
  static <T extends SqsException> T assertSqsError(Class<T> type, String code, int status, String message, Executable call) {
    T e = assertThrows(type, call);
    String seen = e.getClass().getSimpleName() + " / " + e.awsErrorDetails().errorCode() + " / " + e.statusCode() + ": "
        + e.awsErrorDetails().errorMessage();
    assertEquals(type, e.getClass(), "exception class (" + seen + ")");
    assertEquals(code, e.awsErrorDetails().errorCode(), "error code (" + seen + ")");
    assertEquals(status, e.statusCode(), "HTTP status (" + seen + ")");
    assertEquals(status, e.awsErrorDetails().sdkHttpResponse().statusCode(), "HTTP status (" + seen + ")");
    if (message != null) assertEquals(message, e.awsErrorDetails().errorMessage(), "message (" + seen + ")");
    return e;
  }

  static final String NO_QUEUE = "AWS.SimpleQueueService.NonExistentQueue";

  // ---- queues -----------------------------------------------------------------------------

  @Test
  void createQueueReturnsUrlAndAppliesAttributes() {
    Map<String, String> a = Map.of("DelaySeconds", "5", "MaximumMessageSize", "2048", "MessageRetentionPeriod", "86400",
        "ReceiveMessageWaitTimeSeconds", "3", "VisibilityTimeout", "45");
    Q q = create("create", a);
    assertEquals(server.queueUrl(q.name), q.url);
    Map<String, String> got = attrs(q.url);
    a.forEach((k, v) -> assertEquals(v, got.get(k), k));
    assertEquals(Sqsim.arn(q.name), got.get("QueueArn"));
    // Typed access to the same map, through the SDK's enum.
    assertEquals("45", sqs.getQueueAttributes(b -> b.queueUrl(q.url).attributeNames(QueueAttributeName.VISIBILITY_TIMEOUT))
        .attributes().get(QueueAttributeName.VISIBILITY_TIMEOUT));
  }

  @Test
  void createQueueIsIdempotentAndRefusesDifferentAttributes() {
    Q q = create("idem", Map.of("DelaySeconds", "2", "VisibilityTimeout", "60"));
    assertEquals(q.url, sqs.createQueue(b -> b.queueName(q.name).attributesWithStrings(Map.of("VisibilityTimeout", "60"))).queueUrl());
    assertEquals(q.url, sqs.createQueue(b -> b.queueName(q.name)).queueUrl());
    assertSqsError(QueueNameExistsException.class, "QueueAlreadyExists", 400,
        "A queue already exists with the same name and a different value for attribute DelaySeconds",
        () -> sqs.createQueue(b -> b.queueName(q.name).attributesWithStrings(Map.of("DelaySeconds", "3"))));
  }

  @Test
  void createQueueRejectsBadNamesAndValues() {
    assertSqsError(SqsException.class, "InvalidParameterValue", 400, null, () -> sqs.createQueue(b -> b.queueName("has space")));
    assertSqsError(SqsException.class, "InvalidParameterValue", 400, null, () -> sqs.createQueue(b -> b.queueName("x".repeat(81))));
    assertSqsError(InvalidAttributeValueException.class, "InvalidAttributeValue", 400,
        "Invalid value for the parameter VisibilityTimeout.",
        () -> sqs.createQueue(b -> b.queueName(uniqueName("bad")).attributesWithStrings(Map.of("VisibilityTimeout", "43201"))));
    assertSqsError(InvalidAttributeNameException.class, "InvalidAttributeName", 400, "Unknown Attribute ContentBasedDeduplication.",
        () -> sqs.createQueue(b -> b.queueName(uniqueName("bad")).attributesWithStrings(Map.of("ContentBasedDeduplication", "true"))));
    assertSqsError(SqsException.class, "InvalidParameterValue", 400, null,
        () -> sqs.createQueue(b -> b.queueName(uniqueName("f") + ".fifo")));
  }

  @Test
  void createFifoQueueWithTags() {
    String name = uniqueName("fifo") + ".fifo";
    String url = sqs.createQueue(b -> b.queueName(name)
        .attributes(Map.of(QueueAttributeName.FIFO_QUEUE, "true", QueueAttributeName.CONTENT_BASED_DEDUPLICATION, "true"))
        .tags(Map.of("team", "core", "env", "test"))).queueUrl();
    assertEquals(server.queueUrl(name), url);
    Map<String, String> a = attrs(url);
    assertEquals("true", a.get("FifoQueue"));
    assertEquals("true", a.get("ContentBasedDeduplication"));
    assertEquals("queue", a.get("DeduplicationScope"));
    assertEquals("perQueue", a.get("FifoThroughputLimit"));
    assertEquals(Map.of("team", "core", "env", "test"), sqs.listQueueTags(b -> b.queueUrl(url)).tags());
  }

  @Test
  void getQueueUrlAndQueueDoesNotExist() {
    Q q = create("geturl");
    assertEquals(q.url, sqs.getQueueUrl(b -> b.queueName(q.name)).queueUrl());
    assertEquals(q.url, sqs.getQueueUrl(b -> b.queueName(q.name).queueOwnerAWSAccountId(ACCOUNT)).queueUrl());
    assertSqsError(QueueDoesNotExistException.class, NO_QUEUE, 400, "The specified queue does not exist.",
        () -> sqs.getQueueUrl(b -> b.queueName(uniqueName("missing"))));
    String ghost = server.queueUrl(uniqueName("ghost"));
    assertSqsError(QueueDoesNotExistException.class, NO_QUEUE, 400, null, () -> sqs.sendMessage(b -> b.queueUrl(ghost).messageBody("x")));
    assertSqsError(QueueDoesNotExistException.class, NO_QUEUE, 400, null, () -> sqs.receiveMessage(b -> b.queueUrl(ghost)));
    assertSqsError(QueueDoesNotExistException.class, NO_QUEUE, 400, null,
        () -> sqs.getQueueAttributes(b -> b.queueUrl(ghost).attributeNamesWithStrings("All")));
    assertSqsError(QueueDoesNotExistException.class, NO_QUEUE, 400, null, () -> sqs.deleteQueue(b -> b.queueUrl(ghost)));
  }

  @Test
  void listQueuesFiltersPagesAndPaginates() {
    String prefix = uniqueName("page");
    List<String> urls = new ArrayList<>();
    for (String s : List.of("a", "b", "c", "d", "e")) {
      urls.add(sqs.createQueue(b -> b.queueName(prefix + "-" + s)).queueUrl());
    }
    ListQueuesResponse first = sqs.listQueues(b -> b.queueNamePrefix(prefix).maxResults(2));
    assertEquals(urls.subList(0, 2), first.queueUrls());
    assertTrue(first.nextToken() != null && !first.nextToken().isEmpty(), "a NextToken for more");
    List<String> all = new ArrayList<>(first.queueUrls());
    String token = first.nextToken();
    int pages = 1;
    while (token != null) {
      String t = token;
      ListQueuesResponse page = sqs.listQueues(b -> b.queueNamePrefix(prefix).maxResults(2).nextToken(t));
      all.addAll(page.queueUrls());
      token = page.nextToken();
      assertTrue(++pages <= 5, "pagination does not terminate");
    }
    assertEquals(3, pages);
    assertEquals(urls, all);
    assertEquals(urls, paginateQueues(prefix, 2), "the SDK's paginator");
    ListQueuesResponse exact = sqs.listQueues(b -> b.queueNamePrefix(prefix).maxResults(5));
    assertEquals(5, exact.queueUrls().size());
    assertNull(exact.nextToken());
    ListQueuesResponse lower = sqs.listQueues(b -> b.queueNamePrefix(prefix.toUpperCase()));
    assertFalse(lower.hasQueueUrls(), "the prefix is case-sensitive and an empty list is left out");
    assertSqsError(SqsException.class, "InvalidParameterValue", 400, null, () -> sqs.listQueues(b -> b.maxResults(1001)));
  }

  @Test
  void getQueueAttributesAllOnANewQueue() {
    Q q = create("attrs");
    long nowS = server.nowMs() / 1000;
    Map<String, String> a = attrs(q.url);
    assertEquals(List.of("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed", "ApproximateNumberOfMessagesNotVisible",
        "CreatedTimestamp", "DelaySeconds", "LastModifiedTimestamp", "MaximumMessageSize", "MessageRetentionPeriod", "QueueArn",
        "ReceiveMessageWaitTimeSeconds", "SqsManagedSseEnabled", "VisibilityTimeout"), new ArrayList<>(new TreeMap<>(a).keySet()));
    assertEquals("0", a.get("ApproximateNumberOfMessages"));
    assertEquals("1048576", a.get("MaximumMessageSize"));
    assertEquals("345600", a.get("MessageRetentionPeriod"));
    assertEquals("30", a.get("VisibilityTimeout"));
    assertEquals("true", a.get("SqsManagedSseEnabled"));
    assertTrue(a.get("CreatedTimestamp").matches("\\d+"), a.get("CreatedTimestamp"));
    assertTrue(Math.abs(Long.parseLong(a.get("CreatedTimestamp")) - nowS) <= 2, "CreatedTimestamp is epoch seconds");
    assertFalse(sqs.getQueueAttributes(b -> b.queueUrl(q.url)).hasAttributes(), "no AttributeNames, no Attributes");
    assertSqsError(InvalidAttributeNameException.class, "InvalidAttributeName", 400, "Unknown Attribute Foobar.",
        () -> sqs.getQueueAttributes(b -> b.queueUrl(q.url).attributeNamesWithStrings("Foobar")));
  }

  @Test
  void setQueueAttributesRoundTripsAndRejects() {
    Q q = create("setattrs");
    Map<String, String> before = attrs(q.url);
    server.advance(10);
    String policy = "{\"Version\":\"2012-10-17\",\"Statement\":[{\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":\"sqs:SendMessage\","
        + "\"Resource\":\"" + Sqsim.arn(q.name) + "\"}]}";
    sqs.setQueueAttributes(b -> b.queueUrl(q.url).attributesWithStrings(
        Map.of("VisibilityTimeout", "120", "DelaySeconds", "7", "Policy", policy, "ReceiveMessageWaitTimeSeconds", "20")));
    Map<String, String> after = attrs(q.url);
    assertEquals("120", after.get("VisibilityTimeout"));
    assertEquals("7", after.get("DelaySeconds"));
    assertEquals("20", after.get("ReceiveMessageWaitTimeSeconds"));
    assertTrue(after.get("Policy").contains("sqs:SendMessage"), after.get("Policy"));
    assertEquals(before.get("CreatedTimestamp"), after.get("CreatedTimestamp"));
    assertTrue(Long.parseLong(after.get("LastModifiedTimestamp")) >= Long.parseLong(before.get("LastModifiedTimestamp")) + 10);
    assertSqsError(InvalidAttributeValueException.class, "InvalidAttributeValue", 400,
        "Invalid value for the parameter MessageRetentionPeriod.",
        () -> sqs.setQueueAttributes(b -> b.queueUrl(q.url).attributesWithStrings(Map.of("MessageRetentionPeriod", "59"))));
    assertSqsError(InvalidAttributeNameException.class, "InvalidAttributeName", 400, "Unknown Attribute QueueArn.",
        () -> sqs.setQueueAttributes(b -> b.queueUrl(q.url).attributesWithStrings(Map.of("QueueArn", "arn:x"))));
  }

  @Test
  void tagsMergeAndUntag() {
    Q q = create("tags");
    sqs.tagQueue(b -> b.queueUrl(q.url).tags(Map.of("a", "1", "B", "2")));
    sqs.tagQueue(b -> b.queueUrl(q.url).tags(Map.of("a", "3")));
    assertEquals(Map.of("a", "3", "B", "2"), sqs.listQueueTags(b -> b.queueUrl(q.url)).tags());
    sqs.untagQueue(b -> b.queueUrl(q.url).tagKeys("B", "missing"));
    assertEquals(Map.of("a", "3"), sqs.listQueueTags(b -> b.queueUrl(q.url)).tags());
    sqs.untagQueue(b -> b.queueUrl(q.url).tagKeys("a"));
    assertFalse(sqs.listQueueTags(b -> b.queueUrl(q.url)).hasTags(), "no tags, no Tags");
  }

  @Test
  void deleteQueueThenQueueDeletedRecently() {
    server.freeze(true);
    try {
      Q q = create("gone");
      sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("left behind"));
      sqs.deleteQueue(b -> b.queueUrl(q.url));
      assertSqsError(QueueDoesNotExistException.class, NO_QUEUE, 400, null, () -> sqs.getQueueUrl(b -> b.queueName(q.name)));
      assertSqsError(QueueDeletedRecentlyException.class, "AWS.SimpleQueueService.QueueDeletedRecently", 400,
          "You must wait 60 seconds after deleting a queue before you can create another with the same name.",
          () -> sqs.createQueue(b -> b.queueName(q.name)));
      server.advance(60);
      assertEquals(q.url, sqs.createQueue(b -> b.queueName(q.name)).queueUrl());
      assertEquals(List.of(0, 0, 0), counts(q.url), "a new, empty queue");
    } finally {
      server.freeze(false);
    }
  }

  @Test
  void purgeQueueOnceAMinute() {
    server.freeze(true);
    try {
      Q q = create("purge");
      sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("visible"));
      sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("inflight"));
      sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("delayed").delaySeconds(600));
      assertEquals(1, sqs.receiveMessage(b -> b.queueUrl(q.url)).messages().size());
      assertEquals(List.of(1, 1, 1), counts(q.url));
      sqs.purgeQueue(b -> b.queueUrl(q.url));
      assertEquals(List.of(0, 0, 0), counts(q.url));
      assertSqsError(PurgeQueueInProgressException.class, "AWS.SimpleQueueService.PurgeQueueInProgress", 403, null,
          () -> sqs.purgeQueue(b -> b.queueUrl(q.url)));
      server.advance(60);
      sqs.purgeQueue(b -> b.queueUrl(q.url));
    } finally {
      server.freeze(false);
    }
  }

  @Test
  void addPermissionRoundTripsAndOverLimit() {
    Q q = create("perm");
    sqs.addPermission(b -> b.queueUrl(q.url).label("one").awsAccountIds("111122223333").actions("ReceiveMessage"));
    assertTrue(attrs(q.url, "Policy").get("Policy").contains("\"Sid\":\"one\""));
    List<String> eight = List.of("ChangeMessageVisibility", "DeleteMessage", "GetQueueAttributes", "GetQueueUrl",
        "ListDeadLetterSourceQueues", "PurgeQueue", "ReceiveMessage", "SendMessage");
    assertSqsError(OverLimitException.class, "OverLimit", 403, "8 Actions were found, maximum allowed is 7.",
        () -> sqs.addPermission(b -> b.queueUrl(q.url).label("many").awsAccountIds("111122223333").actions(eight)));
    sqs.removePermission(b -> b.queueUrl(q.url).label("one"));
    assertNull(attrs(q.url).get("Policy"), "removing the last statement deletes Policy");
  }

  // ---- sending ----------------------------------------------------------------------------

  @Test
  void sendEveryAttributeTypeAndReceiveIt() {
    Q q = create("send");
    Map<String, MessageAttributeValue> ma = new LinkedHashMap<>();
    ma.put("Str", str("String", "quote \" cr \r nl \n ünïcødé 😀"));
    ma.put("Num", str("Number", "-12345.678e3"));
    ma.put("Num.custom", str("Number.int", "42"));
    ma.put("Bin", bin("Binary", Sqsim.NON_UTF8));
    ma.put("Bin.gif", bin("Binary.gif", "GIF89a".getBytes(StandardCharsets.US_ASCII)));
    ma.put("attr.1øßä", str("String.label", "x"));
    SendMessageResponse sent = sqs.sendMessage(b -> b.queueUrl(q.url).messageBody(TRICKY_BODY).messageAttributes(ma));
    assertTrue(sent.messageId().matches("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"), sent.messageId());
    assertEquals(md5Hex(TRICKY_BODY), sent.md5OfMessageBody());
    assertEquals(md5OfAttributes(ma), sent.md5OfMessageAttributes());
    assertNull(sent.md5OfMessageSystemAttributes());
    assertNull(sent.sequenceNumber());

    Message m = sqs.receiveMessage(b -> b.queueUrl(q.url).messageAttributeNames("All")).messages().get(0);
    assertEquals(sent.messageId(), m.messageId());
    assertEquals(TRICKY_BODY, m.body());
    assertEquals(sent.md5OfMessageBody(), m.md5OfBody());
    assertEquals(sent.md5OfMessageAttributes(), m.md5OfMessageAttributes());
    assertEquals(ma.keySet(), m.messageAttributes().keySet());
    assertArrayEquals(Sqsim.NON_UTF8, m.messageAttributes().get("Bin").binaryValue().asByteArray(), "non-UTF-8 bytes intact");
    assertEquals("Number.int", m.messageAttributes().get("Num.custom").dataType());
    assertEquals("-12345.678e3", m.messageAttributes().get("Num").stringValue(), "a Number keeps its spelling");
    assertEquals(ma, m.messageAttributes());
  }

  @Test
  void attributeDigestsMatchTheAwsRecordedOnes() {
    Q q = create("vectors");
    List<Map.Entry<Map<String, MessageAttributeValue>, String>> vectors = List.of(
        Map.entry(Map.of("Foo", str("String", "Bar")), "ae7155c6026991b6d54b11589678bf9c"),
        Map.entry(Map.of("MyAttribute", str("String", "foobar")), "adb59cd4678ea5a855436b949cd07ab6"),
        Map.entry(Map.of("timestamp", str("Number", "1493147359900")), "235c5c510d26fb653d073faed50ae77c"),
        Map.entry(Map.of("General", str("String", "Kenobi"), "Hello", str("String", "There"), "Help.Me", str("String", "Me")),
            "4c360f3fdafd970e05fae2f149d997f5"),
        Map.entry(Map.of("attr1", bin("Binary",
            "traceparent\u001e00-774062d6c37081a5a0b9b5b88e30627c-2d2482211f6489da-01".getBytes(StandardCharsets.ISO_8859_1))),
            "8cbe4db156db8a94db8b801b7addb984"));
    for (var v : vectors) {
      assertEquals(v.getValue(), md5OfAttributes(v.getKey()), "the test's own digest");
      SendMessageResponse out = sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("hello").messageAttributes(v.getKey()));
      assertEquals("5d41402abc4b2a76b9719d911017c592", out.md5OfMessageBody());
      assertEquals(v.getValue(), out.md5OfMessageAttributes(), v.getKey().keySet().toString());
    }
  }

  @Test
  void systemAttributeDigestAndAllSystemAttributesOnReceive() {
    Q q = create("sysattr");
    SendMessageResponse plain = sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("plain"));
    assertNull(plain.md5OfMessageAttributes());
    String trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
    SendMessageResponse out = sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("traced")
        .messageAttributes(Map.of("Foo", str("String", "Bar")))
        .messageSystemAttributes(Map.of(MessageSystemAttributeNameForSends.AWS_TRACE_HEADER,
            MessageSystemAttributeValue.builder().dataType("String").stringValue(trace).build())));
    assertEquals("5ae4d5d7636402d80f4eb6d213245a88", out.md5OfMessageSystemAttributes());
    assertEquals("ae7155c6026991b6d54b11589678bf9c", out.md5OfMessageAttributes());
    long now = server.nowMs();
    List<Message> ms = sqs.receiveMessage(b -> b.queueUrl(q.url).maxNumberOfMessages(10)
        .messageSystemAttributeNames(MessageSystemAttributeName.ALL)).messages();
    Message traced = ms.stream().filter(m -> m.body().equals("traced")).findFirst().orElseThrow();
    Message untraced = ms.stream().filter(m -> m.body().equals("plain")).findFirst().orElseThrow();
    assertEquals(trace, traced.attributes().get(MessageSystemAttributeName.AWS_TRACE_HEADER));
    assertEquals(List.of("ApproximateFirstReceiveTimestamp", "ApproximateReceiveCount", "SenderId", "SentTimestamp"),
        new ArrayList<>(new TreeMap<>(untraced.attributesAsStrings()).keySet()));
    assertEquals(ACCOUNT, untraced.attributes().get(MessageSystemAttributeName.SENDER_ID));
    assertEquals("1", untraced.attributes().get(MessageSystemAttributeName.APPROXIMATE_RECEIVE_COUNT));
    String sent = untraced.attributes().get(MessageSystemAttributeName.SENT_TIMESTAMP);
    assertTrue(sent.matches("\\d{13}"), "SentTimestamp is epoch ms: " + sent);
    assertTrue(Math.abs(Long.parseLong(sent) - now) < 5000);
    assertTrue(Long.parseLong(untraced.attributes().get(MessageSystemAttributeName.APPROXIMATE_FIRST_RECEIVE_TIMESTAMP))
        >= Long.parseLong(sent));
    assertFalse(untraced.hasMessageAttributes(), "no message attributes asked for, none sent back");
  }

  @Test
  void messageAttributeFilterDigestsCoverTheSubset() {
    Q q = create("recvfilter");
    sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("filter").messageAttributes(
        Map.of("General", str("String", "Kenobi"), "Hello", str("String", "There"), "Help.Me", str("String", "Me"))));
    Object[][] cases = {
        {List.of("All"), List.of("General", "Hello", "Help.Me"), "4c360f3fdafd970e05fae2f149d997f5"},
        {List.of("Hel.*"), List.of("Hello", "Help.Me"), "83fee93c1bcd8b9a5a923ffacdc636c7"},
        {List.of("General", "Hello"), List.of("General", "Hello"), "fca026605781cb4126a1e9044df24232"},
        {List.of("Nope"), List.of(), null},
    };
    for (Object[] c : cases) {
      @SuppressWarnings("unchecked")
      List<String> filter = (List<String>) c[0];
      Message m = sqs.receiveMessage(b -> b.queueUrl(q.url).messageAttributeNames(filter).visibilityTimeout(0)).messages().get(0);
      assertEquals(c[1], new ArrayList<>(new TreeMap<>(m.messageAttributes()).keySet()), "filter " + filter);
      assertEquals(c[2], m.md5OfMessageAttributes(), "digest for filter " + filter);
    }
  }

  @Test
  void sendRejectsInvalidBodiesAndAttributes() {
    Q q = create("sendbad", Map.of("MaximumMessageSize", "1024"));
    assertSqsError(InvalidMessageContentsException.class, "InvalidMessageContents", 400, null,
        () -> sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("nul \u0000 here")));
    assertSqsError(InvalidMessageContentsException.class, "InvalidMessageContents", 400, null,
        () -> sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("bad \uFFFF")));
    assertSqsError(SqsException.class, "MissingParameter", 400, "The request must contain the parameter MessageBody.",
        () -> sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("")));
    assertSqsError(SqsException.class, "InvalidParameterValue", 400,
        "Message (user) attribute 'ErrorDetails' must contain a non-empty value of type 'String'.",
        () -> sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("x").messageAttributes(Map.of("ErrorDetails", str("String", "")))));
    assertSqsError(SqsException.class, "InvalidParameterValue", 400,
        "One or more parameters are invalid. Reason: Message must be shorter than 1024 bytes.",
        () -> sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("x".repeat(1025))));
    assertSqsError(SqsException.class, "InvalidParameterValue", 400, null,
        () -> sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("x").delaySeconds(901)));
    sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("x".repeat(1024)));
    assertEquals(List.of(1, 0, 0), counts(q.url));
  }

  @Test
  void delaySecondsWaitsForTheClock() {
    Q q = create("delay", Map.of("DelaySeconds", "10"));
    sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("queue-delay"));
    sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("no-delay").delaySeconds(0));
    sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("long").delaySeconds(30));
    assertEquals(List.of("no-delay"), bodies(receiveAndDelete(q.url)));
    server.advance(11);
    assertEquals(List.of("queue-delay"), bodies(receiveAndDelete(q.url)));
    server.advance(20);
    assertEquals(List.of("long"), bodies(receiveAndDelete(q.url)));
  }

  // ---- batches ----------------------------------------------------------------------------

  @Test
  void sendMessageBatchReportsPerEntryDigestsAndPartialFailures() {
    Q q = create("batch", Map.of("MaximumMessageSize", "1024"));
    Map<String, MessageAttributeValue> foo = Map.of("Foo", str("String", "Bar"));
    SendMessageBatchResponse out = sqs.sendMessageBatch(b -> b.queueUrl(q.url).entries(
        SendMessageBatchRequestEntry.builder().id("ok1").messageBody("fine").build(),
        SendMessageBatchRequestEntry.builder().id("badchars").messageBody("bad \u0001 char").build(),
        SendMessageBatchRequestEntry.builder().id("toolong").messageBody("y".repeat(1025)).build(),
        SendMessageBatchRequestEntry.builder().id("ok2").messageBody("also fine").messageAttributes(foo).build()));
    Map<String, SendMessageBatchResultEntry> ok = out.successful().stream()
        .collect(Collectors.toMap(SendMessageBatchResultEntry::id, e -> e));
    assertEquals(java.util.Set.of("ok1", "ok2"), ok.keySet());
    assertEquals(md5Hex("fine"), ok.get("ok1").md5OfMessageBody());
    assertNull(ok.get("ok1").md5OfMessageAttributes());
    assertEquals("ae7155c6026991b6d54b11589678bf9c", ok.get("ok2").md5OfMessageAttributes());
    Map<String, BatchResultErrorEntry> failed = out.failed().stream().collect(Collectors.toMap(BatchResultErrorEntry::id, e -> e));
    assertEquals(java.util.Set.of("badchars", "toolong"), failed.keySet());
    assertEquals("InvalidMessageContents", failed.get("badchars").code());
    assertTrue(failed.get("badchars").senderFault());
    assertEquals("InvalidParameterValue", failed.get("toolong").code());
    assertEquals("One or more parameters cannot be validated. Reason: Message must be shorter than 1024 bytes.",
        failed.get("toolong").message());
    assertEquals(List.of("also fine", "fine"), bodies(receive(q.url)));
  }

  @Test
  void batchRequestsFailAsAWholeWithTypedExceptions() {
    Q q = create("batchreq");
    assertSqsError(EmptyBatchRequestException.class, "AWS.SimpleQueueService.EmptyBatchRequest", 400, null,
        () -> sqs.sendMessageBatch(b -> b.queueUrl(q.url).entries(List.of())));
    List<SendMessageBatchRequestEntry> eleven = IntStream.range(0, 11)
        .mapToObj(i -> SendMessageBatchRequestEntry.builder().id("m" + i).messageBody("x").build()).collect(Collectors.toList());
    assertSqsError(TooManyEntriesInBatchRequestException.class, "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", 400,
        "Maximum number of entries per request are 10. You have sent 11.", () -> sqs.sendMessageBatch(b -> b.queueUrl(q.url).entries(eleven)));
    assertSqsError(BatchEntryIdsNotDistinctException.class, "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", 400, null,
        () -> sqs.sendMessageBatch(b -> b.queueUrl(q.url).entries(
            SendMessageBatchRequestEntry.builder().id("a").messageBody("x").build(),
            SendMessageBatchRequestEntry.builder().id("a").messageBody("y").build())));
    assertSqsError(InvalidBatchEntryIdException.class, "AWS.SimpleQueueService.InvalidBatchEntryId", 400,
        "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.",
        () -> sqs.sendMessageBatch(b -> b.queueUrl(q.url).entries(SendMessageBatchRequestEntry.builder().id("bad id!").messageBody("x").build())));
    String big = "z".repeat(262144);
    assertSqsError(BatchRequestTooLongException.class, "AWS.SimpleQueueService.BatchRequestTooLong", 400,
        "Batch requests cannot be longer than 1048576 bytes. You have sent 1048577 bytes.",
        () -> sqs.sendMessageBatch(b -> b.queueUrl(q.url).entries(
            IntStream.range(0, 5).mapToObj(i -> SendMessageBatchRequestEntry.builder().id("b" + i).messageBody(i < 4 ? big : "z").build())
                .collect(Collectors.toList()))));
    assertSqsError(EmptyBatchRequestException.class, "AWS.SimpleQueueService.EmptyBatchRequest", 400, null,
        () -> sqs.deleteMessageBatch(b -> b.queueUrl(q.url).entries(List.of())));
    assertSqsError(BatchEntryIdsNotDistinctException.class, "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", 400, null,
        () -> sqs.changeMessageVisibilityBatch(b -> b.queueUrl(q.url).entries(
            ChangeMessageVisibilityBatchRequestEntry.builder().id("a").receiptHandle("x").visibilityTimeout(1).build(),
            ChangeMessageVisibilityBatchRequestEntry.builder().id("a").receiptHandle("y").visibilityTimeout(1).build())));
    assertEquals(List.of(0, 0, 0), counts(q.url));
  }

  // ---- receiving, visibility, deletes ------------------------------------------------------

  @Test
  void receiveValidatesAndHonoursMaxNumberOfMessages() {
    Q q = create("recvmax");
    assertFalse(sqs.receiveMessage(b -> b.queueUrl(q.url)).hasMessages(), "an empty queue: no Messages");
    sqs.sendMessageBatch(b -> b.queueUrl(q.url).entries(IntStream.range(0, 10)
        .mapToObj(i -> SendMessageBatchRequestEntry.builder().id("e" + i).messageBody("body-" + i).build()).collect(Collectors.toList())));
    assertEquals(3, sqs.receiveMessage(b -> b.queueUrl(q.url).maxNumberOfMessages(3)).messages().size());
    assertEquals(1, sqs.receiveMessage(b -> b.queueUrl(q.url)).messages().size(), "default MaxNumberOfMessages is 1");
    assertEquals(6, receive(q.url).size());
    assertSqsError(SqsException.class, "InvalidParameterValue", 400,
        "Value 11 for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.",
        () -> sqs.receiveMessage(b -> b.queueUrl(q.url).maxNumberOfMessages(11)));
    assertSqsError(SqsException.class, "InvalidParameterValue", 400,
        "Value 21 for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.",
        () -> sqs.receiveMessage(b -> b.queueUrl(q.url).waitTimeSeconds(21)));
  }

  @Test
  void longPollReturnsSoonAfterASendFromAnotherClient() throws Exception {
    Q q = create("longpoll");
    long started = System.nanoTime();
    CompletableFuture<ReceiveMessageResponse> pending = CompletableFuture.supplyAsync(
        () -> sqs.receiveMessage(b -> b.queueUrl(q.url).waitTimeSeconds(20).maxNumberOfMessages(10)));
    Thread.sleep(500);
    other.sendMessage(b -> b.queueUrl(q.url).messageBody("wake up"));
    ReceiveMessageResponse out = pending.get();
    long elapsedMs = (System.nanoTime() - started) / 1_000_000;
    assertEquals(List.of("wake up"), bodies(out.messages()));
    assertTrue(elapsedMs >= 400 && elapsedMs < 5000, "long poll took " + elapsedMs + " ms");
  }

  @Test
  void longPollTimesOutEmptyWithTheQueueWaitTime() {
    Q q = create("longpoll2", Map.of("ReceiveMessageWaitTimeSeconds", "1"));
    long t = System.nanoTime();
    assertFalse(sqs.receiveMessage(b -> b.queueUrl(q.url)).hasMessages());
    long elapsedMs = (System.nanoTime() - t) / 1_000_000;
    assertTrue(elapsedMs >= 900 && elapsedMs < 5000, "queue-level wait took " + elapsedMs + " ms");
    t = System.nanoTime();
    assertFalse(sqs.receiveMessage(b -> b.queueUrl(q.url).waitTimeSeconds(0)).hasMessages());
    assertTrue((System.nanoTime() - t) / 1_000_000 < 900, "WaitTimeSeconds=0 short-polls");
  }

  @Test
  void visibilityTimeoutHidesThenRedeliversWithANewHandle() {
    Q q = create("vis");
    sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("again"));
    Message first = sqs.receiveMessage(b -> b.queueUrl(q.url).messageSystemAttributeNames(MessageSystemAttributeName.APPROXIMATE_RECEIVE_COUNT))
        .messages().get(0);
    assertEquals("1", first.attributes().get(MessageSystemAttributeName.APPROXIMATE_RECEIVE_COUNT));
    assertTrue(receive(q.url).isEmpty());
    server.advance(29);
    assertTrue(receive(q.url).isEmpty());
    server.advance(2);
    Message second = sqs.receiveMessage(b -> b.queueUrl(q.url).messageSystemAttributeNames(MessageSystemAttributeName.APPROXIMATE_RECEIVE_COUNT))
        .messages().get(0);
    assertEquals(first.messageId(), second.messageId());
    assertNotEquals(first.receiptHandle(), second.receiptHandle());
    assertEquals("2", second.attributes().get(MessageSystemAttributeName.APPROXIMATE_RECEIVE_COUNT));
    // The change is measured from now; 0 makes it visible at once.
    sqs.changeMessageVisibility(b -> b.queueUrl(q.url).receiptHandle(second.receiptHandle()).visibilityTimeout(100));
    server.advance(99);
    assertTrue(receive(q.url).isEmpty());
    server.advance(2);
    Message third = receive(q.url).get(0);
    sqs.changeMessageVisibility(b -> b.queueUrl(q.url).receiptHandle(third.receiptHandle()).visibilityTimeout(0));
    assertEquals(first.messageId(), receive(q.url).get(0).messageId());
  }

  @Test
  void changeVisibilityRejectsAndBatchesPerEntry() {
    Q q = create("cmv");
    sqs.sendMessageBatch(b -> b.queueUrl(q.url).entries(
        SendMessageBatchRequestEntry.builder().id("a").messageBody("show").build(),
        SendMessageBatchRequestEntry.builder().id("b").messageBody("hide").build()));
    List<Message> ms = receive(q.url);
    assertEquals(2, ms.size());
    Message show = ms.stream().filter(m -> m.body().equals("show")).findFirst().orElseThrow();
    Message hide = ms.stream().filter(m -> m.body().equals("hide")).findFirst().orElseThrow();
    assertSqsError(SqsException.class, "InvalidParameterValue", 400, null,
        () -> sqs.changeMessageVisibility(b -> b.queueUrl(q.url).receiptHandle(hide.receiptHandle()).visibilityTimeout(43201)));
    assertSqsError(ReceiptHandleIsInvalidException.class, "ReceiptHandleIsInvalid", 404, null,
        () -> sqs.changeMessageVisibility(b -> b.queueUrl(q.url).receiptHandle("garbage").visibilityTimeout(10)));
    ChangeMessageVisibilityBatchResponse out = sqs.changeMessageVisibilityBatch(b -> b.queueUrl(q.url).entries(
        ChangeMessageVisibilityBatchRequestEntry.builder().id("show").receiptHandle(show.receiptHandle()).visibilityTimeout(0).build(),
        ChangeMessageVisibilityBatchRequestEntry.builder().id("hide").receiptHandle(hide.receiptHandle()).visibilityTimeout(600).build(),
        ChangeMessageVisibilityBatchRequestEntry.builder().id("bad").receiptHandle("garbage").visibilityTimeout(0).build(),
        ChangeMessageVisibilityBatchRequestEntry.builder().id("range").receiptHandle(hide.receiptHandle()).visibilityTimeout(50000).build()));
    assertEquals(List.of("hide", "show"), out.successful().stream().map(ChangeMessageVisibilityBatchResultEntry::id).sorted().toList());
    Map<String, BatchResultErrorEntry> failed = out.failed().stream().collect(Collectors.toMap(BatchResultErrorEntry::id, e -> e));
    assertEquals("ReceiptHandleIsInvalid", failed.get("bad").code());
    assertTrue(failed.get("bad").senderFault());
    assertEquals("InvalidParameterValue", failed.get("range").code());
    assertEquals(List.of("show"), bodies(receiveAndDelete(q.url)));
    server.advance(601);
    assertEquals(List.of("hide"), bodies(receive(q.url)));
  }

  @Test
  void deleteAndDeleteBatch() {
    Q q = create("del");
    Q otherQ = create("del-other");
    sqs.sendMessageBatch(b -> b.queueUrl(q.url).entries(IntStream.range(0, 3)
        .mapToObj(i -> SendMessageBatchRequestEntry.builder().id("e" + i).messageBody("m" + i).build()).collect(Collectors.toList())));
    List<Message> ms = receive(q.url);
    assertEquals(3, ms.size());
    sqs.deleteMessage(b -> b.queueUrl(q.url).receiptHandle(ms.get(0).receiptHandle()));
    sqs.deleteMessage(b -> b.queueUrl(q.url).receiptHandle(ms.get(0).receiptHandle())); // repeated: fine
    assertSqsError(ReceiptHandleIsInvalidException.class, "ReceiptHandleIsInvalid", 404, null,
        () -> sqs.deleteMessage(b -> b.queueUrl(q.url).receiptHandle("garbage")));
    assertSqsError(ReceiptHandleIsInvalidException.class, "ReceiptHandleIsInvalid", 404, null,
        () -> sqs.deleteMessage(b -> b.queueUrl(otherQ.url).receiptHandle(ms.get(1).receiptHandle())));
    DeleteMessageBatchResponse out = sqs.deleteMessageBatch(b -> b.queueUrl(q.url).entries(
        DeleteMessageBatchRequestEntry.builder().id("one").receiptHandle(ms.get(1).receiptHandle()).build(),
        DeleteMessageBatchRequestEntry.builder().id("two").receiptHandle(ms.get(2).receiptHandle()).build(),
        DeleteMessageBatchRequestEntry.builder().id("bad").receiptHandle("garbage").build()));
    assertEquals(List.of("one", "two"), out.successful().stream().map(DeleteMessageBatchResultEntry::id).sorted().toList());
    assertEquals(1, out.failed().size());
    assertEquals("bad", out.failed().get(0).id());
    assertEquals("ReceiptHandleIsInvalid", out.failed().get(0).code());
    assertTrue(out.failed().get(0).senderFault());
    server.advance(31);
    assertTrue(receive(q.url).isEmpty(), "deleted for good");
  }

  // ---- FIFO ---------------------------------------------------------------------------------

  @Test
  void fifoOrderSequenceNumbersAndSystemAttributes() {
    Q q = fifo("order", Map.of());
    List<String> seqs = new ArrayList<>();
    for (int i = 1; i <= 3; i++) {
      int n = i;
      SendMessageResponse r = sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("g1-m" + n).messageGroupId("g1").messageDeduplicationId("d1-" + n));
      assertTrue(r.sequenceNumber().matches("\\d{20}"), "SequenceNumber is 20 digits: " + r.sequenceNumber());
      seqs.add(r.sequenceNumber());
    }
    SendMessageBatchResponse batch = sqs.sendMessageBatch(b -> b.queueUrl(q.url).entries(
        SendMessageBatchRequestEntry.builder().id("a").messageBody("g2-m1").messageGroupId("g2").messageDeduplicationId("d2-1").build(),
        SendMessageBatchRequestEntry.builder().id("b").messageBody("g2-m2").messageGroupId("g2").messageDeduplicationId("d2-2").build()));
    assertTrue(batch.failed().isEmpty());
    batch.successful().forEach(e -> seqs.add(e.sequenceNumber()));
    for (int i = 1; i < seqs.size(); i++) {
      assertTrue(new java.math.BigInteger(seqs.get(i)).compareTo(new java.math.BigInteger(seqs.get(i - 1))) > 0, "increasing: " + seqs);
    }
    List<Message> ms = sqs.receiveMessage(b -> b.queueUrl(q.url).maxNumberOfMessages(10)
        .messageSystemAttributeNames(MessageSystemAttributeName.ALL)).messages();
    assertEquals(List.of("g1-m1", "g1-m2", "g1-m3", "g2-m1", "g2-m2"), ms.stream().map(Message::body).toList());
    Message m = ms.get(0);
    assertEquals("g1", m.attributes().get(MessageSystemAttributeName.MESSAGE_GROUP_ID));
    assertEquals("d1-1", m.attributes().get(MessageSystemAttributeName.MESSAGE_DEDUPLICATION_ID));
    assertEquals(seqs.get(0), m.attributes().get(MessageSystemAttributeName.SEQUENCE_NUMBER));
    assertTrue(receive(q.url).isEmpty(), "every group is locked while its messages are in flight");
  }

  @Test
  void fifoDeduplicationExplicitAndContentBased() {
    Q q = fifo("dedup", Map.of("ContentBasedDeduplication", "true"));
    SendMessageResponse first = sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("same").messageGroupId("g"));
    SendMessageResponse again = sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("same").messageGroupId("g"));
    assertEquals(first.messageId(), again.messageId(), "a duplicate returns the original MessageId");
    SendMessageResponse explicit = sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("same").messageGroupId("g").messageDeduplicationId("x"));
    assertNotEquals(first.messageId(), explicit.messageId(), "an explicit id overrides the content's");
    List<Message> ms = sqs.receiveMessage(b -> b.queueUrl(q.url).maxNumberOfMessages(10)
        .messageSystemAttributeNames(MessageSystemAttributeName.MESSAGE_DEDUPLICATION_ID)).messages();
    assertEquals(2, ms.size());
    assertEquals(Sqsim.sha256Hex("same"), ms.get(0).attributes().get(MessageSystemAttributeName.MESSAGE_DEDUPLICATION_ID));
    server.advance(301);
    assertNotEquals(first.messageId(), sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("same").messageGroupId("g")).messageId(),
        "the deduplication window is 5 minutes");
  }

  @Test
  void fifoRequirementsAndRetriedReceiveAttempt() {
    Q q = fifo("fiforeq", Map.of());
    assertSqsError(SqsException.class, "MissingParameter", 400, null,
        () -> sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("x").messageDeduplicationId("d")));
    assertSqsError(SqsException.class, "InvalidParameterValue", 400, null,
        () -> sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("x").messageGroupId("g")));
    assertSqsError(SqsException.class, "InvalidParameterValue", 400, null,
        () -> sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("x").messageGroupId("g").messageDeduplicationId("d").delaySeconds(5)));
    sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("a").messageGroupId("g").messageDeduplicationId("1"));
    sqs.sendMessage(b -> b.queueUrl(q.url).messageBody("b").messageGroupId("g").messageDeduplicationId("2"));
    List<Message> first = sqs.receiveMessage(b -> b.queueUrl(q.url).maxNumberOfMessages(10).receiveRequestAttemptId("attempt-1")).messages();
    List<Message> retry = sqs.receiveMessage(b -> b.queueUrl(q.url).maxNumberOfMessages(10).receiveRequestAttemptId("attempt-1")).messages();
    assertEquals(List.of("a", "b"), first.stream().map(Message::body).toList());
    assertEquals(first.stream().map(Message::receiptHandle).toList(), retry.stream().map(Message::receiptHandle).toList(),
        "a retried attempt returns the same receipt handles");
  }

  // ---- dead letters and move tasks ------------------------------------------------------------

  String redrive(String dlqUrl, int max) {
    String arn = attrs(dlqUrl, "QueueArn").get("QueueArn");
    return "{\"deadLetterTargetArn\":\"" + arn + "\",\"maxReceiveCount\":" + max + "}";
  }

  @Test
  void deadLetterAfterMaxReceiveCountAndListSources() {
    Q dlq = create("dlq");
    Q src = create("src", Map.of("RedrivePolicy", redrive(dlq.url, 2)));
    Q src2 = create("src2", Map.of("RedrivePolicy", redrive(dlq.url, 5)));
    Q src3 = create("src3", Map.of("RedrivePolicy", redrive(dlq.url, 5)));
    String id = sqs.sendMessage(b -> b.queueUrl(src.url).messageBody("poison")).messageId();
    for (int i = 0; i < 2; i++) {
      assertEquals(id, receive(src.url).get(0).messageId());
      server.advance(31);
    }
    assertTrue(receive(src.url).isEmpty(), "the third receive moves it");
    Message dead = sqs.receiveMessage(b -> b.queueUrl(dlq.url).messageSystemAttributeNames(MessageSystemAttributeName.ALL)).messages().get(0);
    assertEquals(id, dead.messageId());
    assertEquals("poison", dead.body());
    assertEquals(Sqsim.arn(src.name), dead.attributes().get(MessageSystemAttributeName.DEAD_LETTER_QUEUE_SOURCE_ARN));
    assertEquals(List.of(src.url, src2.url, src3.url).stream().sorted().toList(),
        sqs.listDeadLetterSourceQueues(b -> b.queueUrl(dlq.url)).queueUrls().stream().sorted().toList());
    assertEquals(List.of(src.url, src2.url, src3.url).stream().sorted().toList(),
        paginateDeadLetterSources(dlq.url, 2).stream().sorted().toList(), "the SDK's paginator");
    assertSqsError(SqsException.class, "InvalidParameterValue", 400, null,
        () -> sqs.setQueueAttributes(b -> b.queueUrl(src.url).attributesWithStrings(Map.of("RedrivePolicy", redrive(dlq.url, 0)))));
  }

  List<ListMessageMoveTasksResultEntry> tasks(String sourceArn) {
    return sqs.listMessageMoveTasks(b -> b.sourceArn(sourceArn).maxResults(10)).results();
  }

  ListMessageMoveTasksResultEntry waitTask(String sourceArn, Predicate<ListMessageMoveTasksResultEntry> done, String what)
      throws InterruptedException {
    long deadline = System.nanoTime() + 10_000_000_000L;
    while (true) {
      List<ListMessageMoveTasksResultEntry> ts = tasks(sourceArn);
      if (!ts.isEmpty() && done.test(ts.get(0))) return ts.get(0);
      if (System.nanoTime() > deadline) fail("move task never reached " + what + ": " + ts);
      Thread.sleep(10);
    }
  }

  @Test
  void messageMoveTaskRedrivesBackAndCancels() throws Exception {
    Q dlq = create("mdlq");
    Q src = create("msrc", Map.of("RedrivePolicy", redrive(dlq.url, 1)));
    for (int i = 0; i < 3; i++) {
      int n = i;
      sqs.sendMessage(b -> b.queueUrl(src.url).messageBody("m" + n));
    }
    for (int round = 0; round < 2; round++) {
      for (Message m : receive(src.url)) {
        sqs.changeMessageVisibility(b -> b.queueUrl(src.url).receiptHandle(m.receiptHandle()).visibilityTimeout(0));
      }
    }
    assertEquals(List.of(3, 0, 0), counts(dlq.url));
    String dlqArn = Sqsim.arn(dlq.name);
    assertSqsError(ResourceNotFoundException.class, "ResourceNotFoundException", 404, null,
        () -> sqs.startMessageMoveTask(b -> b.sourceArn(Sqsim.arn(uniqueName("ghost")))));
    assertSqsError(SqsException.class, "InvalidParameterValue", 400, null,
        () -> sqs.startMessageMoveTask(b -> b.sourceArn(dlqArn).maxNumberOfMessagesPerSecond(501)));

    server.freeze(true);
    try {
      String handle = sqs.startMessageMoveTask(b -> b.sourceArn(dlqArn).maxNumberOfMessagesPerSecond(1)).taskHandle();
      ListMessageMoveTasksResultEntry running = waitTask(dlqArn, t -> t.approximateNumberOfMessagesMoved() >= 1, "1 moved");
      assertEquals("RUNNING", running.status());
      assertEquals(handle, running.taskHandle());
      assertEquals(dlqArn, running.sourceArn());
      assertEquals(3L, running.approximateNumberOfMessagesToMove());
      assertTrue(running.startedTimestamp() > 1_000_000_000_000L, "StartedTimestamp is epoch ms: " + running.startedTimestamp());
      assertSqsError(SqsException.class, "InvalidParameterValue", 400,
          "There is already a task running. Only one active task is allowed for a source queue arn at a given time.",
          () -> sqs.startMessageMoveTask(b -> b.sourceArn(dlqArn)));
      assertEquals(1L, sqs.cancelMessageMoveTask(b -> b.taskHandle(handle)).approximateNumberOfMessagesMoved());
      waitTask(dlqArn, t -> t.status().equals("CANCELLED"), "CANCELLED");
    } finally {
      server.freeze(false);
    }
    assertEquals(List.of(1, 0, 0), counts(src.url));
    sqs.startMessageMoveTask(b -> b.sourceArn(dlqArn));
    ListMessageMoveTasksResultEntry done = waitTask(dlqArn, t -> t.status().equals("COMPLETED"), "COMPLETED");
    assertEquals(2L, done.approximateNumberOfMessagesMoved());
    assertEquals(List.of(3, 0, 0), counts(src.url));
    assertEquals(List.of(0, 0, 0), counts(dlq.url));
    assertEquals(2, tasks(dlqArn).size(), "both tasks are listed, newest first");
  }
}
