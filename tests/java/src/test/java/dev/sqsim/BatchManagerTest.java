package dev.sqsim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import software.amazon.awssdk.core.interceptor.Context;
import software.amazon.awssdk.core.interceptor.ExecutionAttributes;
import software.amazon.awssdk.core.interceptor.ExecutionInterceptor;
import software.amazon.awssdk.services.sqs.SqsAsyncClient;
import software.amazon.awssdk.services.sqs.batchmanager.SqsAsyncBatchManager;
import software.amazon.awssdk.services.sqs.model.Message;
import software.amazon.awssdk.services.sqs.model.MessageAttributeValue;
import software.amazon.awssdk.services.sqs.model.ReceiveMessageResponse;
import software.amazon.awssdk.services.sqs.model.SendMessageResponse;

/**
 * The SDK for Java v2's SqsAsyncBatchManager (automatic batching of sends, deletes and
 * visibility changes; buffered receives) under concurrent load: every message sent is received
 * exactly once and deleted, none lost, none duplicated, and the calls really went out as
 * batches. The SDK's MD5 checks stay on for every batched send and receive.
 */
@ExtendWith(Sqsim.class)
class BatchManagerTest {
  static final int PRODUCERS = 8;
  static final int PER_PRODUCER = 75;
  static final int TOTAL = PRODUCERS * PER_PRODUCER;

  /** Counts the requests that reach the wire, by operation. */
  static final class Counter implements ExecutionInterceptor {
    final Map<String, AtomicInteger> calls = new ConcurrentHashMap<>();

    @Override
    public void beforeTransmission(Context.BeforeTransmission context, ExecutionAttributes attrs) {
      calls.computeIfAbsent(context.request().getClass().getSimpleName().replace("Request", ""), k -> new AtomicInteger())
          .incrementAndGet();
    }

    int get(String op) {
      AtomicInteger n = calls.get(op);
      return n == null ? 0 : n.get();
    }
  }

  @Test
  void concurrentSendsReceivesDeletesLoseAndDuplicateNothing() throws Exception {
    Sqsim server = Sqsim.server();
    Counter counter = new Counter();
    ScheduledExecutorService scheduler = Executors.newScheduledThreadPool(4);
    try (SqsAsyncClient client = Clients.async(server.endpoint, counter)) {
      String name = Sqsim.uniqueName("batchmgr");
      // A visibility timeout far above the test's length: a redelivery would be a duplicate.
      String url = client.createQueue(b -> b.queueName(name).attributesWithStrings(Map.of("VisibilityTimeout", "600"))).join().queueUrl();
      try (SqsAsyncBatchManager bm = SqsAsyncBatchManager.builder().client(client).scheduledExecutor(scheduler)
          .overrideConfiguration(o -> o.maxBatchSize(10).sendRequestFrequency(Duration.ofMillis(50))
              .receiveMessageMinWaitDuration(Duration.ofMillis(50)).receiveMessageAttributeNames(List.of("All")))
          .build()) {
        // Producers: 8 threads, each sending its messages without waiting for the answers.
        Map<String, String> sentIds = new ConcurrentHashMap<>();
        List<CompletableFuture<Void>> producers = new ArrayList<>();
        for (int p = 0; p < PRODUCERS; p++) {
          int producer = p;
          producers.add(CompletableFuture.runAsync(() -> {
            List<CompletableFuture<SendMessageResponse>> sends = new ArrayList<>();
            for (int i = 0; i < PER_PRODUCER; i++) {
              String body = "p" + producer + "-m" + i;
              sends.add(bm.sendMessage(b -> b.queueUrl(url).messageBody(body).messageAttributes(Map.of(
                  "producer", MessageAttributeValue.builder().dataType("Number").stringValue(Integer.toString(producer)).build(),
                  "body", MessageAttributeValue.builder().dataType("String").stringValue(body).build())))
                  .thenAccept(r -> {
                    assertEquals(Sqsim.md5Hex(body), r.md5OfMessageBody());
                    if (sentIds.put(body, r.messageId()) != null) fail("two answers for " + body);
                  }).thenApply(v -> (SendMessageResponse) null));
            }
            CompletableFuture.allOf(sends.toArray(CompletableFuture[]::new)).join();
          }));
        }
        CompletableFuture.allOf(producers.toArray(CompletableFuture[]::new)).get(60, TimeUnit.SECONDS);
        assertEquals(TOTAL, sentIds.size());
        assertEquals(TOTAL, Set.copyOf(sentIds.values()).size(), "distinct MessageIds");

        // Consumers: 4 threads receiving through the buffer; each message deleted (or, every
        // tenth, first made visible again and received once more), all through the manager.
        Map<String, String> received = new ConcurrentHashMap<>();
        Set<String> released = ConcurrentHashMap.newKeySet();
        AtomicInteger duplicates = new AtomicInteger();
        List<CompletableFuture<Void>> deletes = new CopyOnWriteList<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        List<CompletableFuture<Void>> consumers = new ArrayList<>();
        for (int c = 0; c < 4; c++) {
          consumers.add(CompletableFuture.runAsync(() -> {
            while (received.size() < TOTAL && System.nanoTime() < deadline) {
              ReceiveMessageResponse r = bm.receiveMessage(b -> b.queueUrl(url).maxNumberOfMessages(10).messageAttributeNames("All")).join();
              for (Message m : r.messages()) {
                String body = m.body();
                assertEquals(body, m.messageAttributes().get("body").stringValue());
                assertEquals(sentIds.get(body), m.messageId(), "the MessageId the send returned");
                if (body.endsWith("0") && released.add(body)) {
                  deletes.add(bm.changeMessageVisibility(b -> b.queueUrl(url).receiptHandle(m.receiptHandle()).visibilityTimeout(0))
                      .thenApply(x -> null));
                  continue;
                }
                if (received.put(body, m.messageId()) != null) duplicates.incrementAndGet();
                deletes.add(bm.deleteMessage(b -> b.queueUrl(url).receiptHandle(m.receiptHandle())).thenApply(x -> null));
              }
            }
          }));
        }
        CompletableFuture.allOf(consumers.toArray(CompletableFuture[]::new)).get(90, TimeUnit.SECONDS);
        CompletableFuture.allOf(deletes.toArray(CompletableFuture[]::new)).get(30, TimeUnit.SECONDS);
        assertEquals(0, duplicates.get(), "no message was delivered twice");
        assertEquals(sentIds.keySet(), received.keySet(), "every message sent was received");
        assertTrue(released.size() >= TOTAL / 10, "released and received again: " + released.size());
        Map<String, String> a = client.getQueueAttributes(b -> b.queueUrl(url).attributeNamesWithStrings(
            "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible")).join().attributesAsStrings();
        assertEquals("0", a.get("ApproximateNumberOfMessages"), "all deleted: " + a);
        assertEquals("0", a.get("ApproximateNumberOfMessagesNotVisible"), "all deleted: " + a);
      }
      // Everything went out batched: no single-message call reached the server.
      assertEquals(0, counter.get("SendMessage"), "sends " + counter.calls);
      assertEquals(0, counter.get("DeleteMessage"), "deletes " + counter.calls);
      assertEquals(0, counter.get("ChangeMessageVisibility"), "visibility changes " + counter.calls);
      assertTrue(counter.get("SendMessageBatch") >= TOTAL / 10 && counter.get("SendMessageBatch") < TOTAL / 2,
          "sends were batched: " + counter.calls);
      assertTrue(counter.get("DeleteMessageBatch") < TOTAL / 2, "deletes were batched: " + counter.calls);
      assertTrue(counter.get("ChangeMessageVisibilityBatch") >= 1, "visibility changes were batched: " + counter.calls);
      client.deleteQueue(b -> b.queueUrl(url)).join();
    } finally {
      scheduler.shutdownNow();
    }
  }

  /** A thread-safe list for the futures the consumers collect. */
  static final class CopyOnWriteList<T> extends java.util.concurrent.CopyOnWriteArrayList<T> {}
}
