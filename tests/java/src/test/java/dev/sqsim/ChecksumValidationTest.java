package dev.sqsim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.amazonaws.AmazonClientException;
import com.amazonaws.auth.AWSStaticCredentialsProvider;
import com.amazonaws.auth.BasicAWSCredentials;
import com.amazonaws.client.builder.AwsClientBuilder.EndpointConfiguration;
import com.amazonaws.services.sqs.AmazonSQS;
import com.amazonaws.services.sqs.AmazonSQSClientBuilder;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;
import software.amazon.awssdk.core.exception.SdkClientException;
import software.amazon.awssdk.services.sqs.SqsClient;
import software.amazon.awssdk.services.sqs.model.MessageAttributeValue;

/**
 * The SDKs' MD5 checks are on, so the suites fail when sqsim's digests are wrong: through a
 * proxy in front of sqsim that replaces one digest in the answer (JSON or XML) with a wrong
 * one, the SDK for Java v2 (JSON) and v1 (query) refuse the send and the receive. Without the
 * corruption the same calls pass, which is what every other test relies on.
 */
@ExtendWith(Sqsim.class)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ChecksumValidationTest {
  static final String WRONG = "00000000000000000000000000000000";
  /** The digest field the proxy breaks (null: none). */
  final AtomicReference<String> corrupt = new AtomicReference<>();
  final AtomicInteger corrupted = new AtomicInteger();
  HttpServer proxy;
  String proxyEndpoint;
  SqsClient direct;

  @BeforeAll
  void startProxy() throws IOException {
    String upstream = Sqsim.server().endpoint;
    HttpClient http = HttpClient.newHttpClient();
    Set<String> restricted = Set.of("host", "connection", "content-length", "expect", "upgrade", "transfer-encoding");
    proxy = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    proxy.createContext("/", ex -> {
      try {
        HttpRequest.Builder req = HttpRequest.newBuilder(URI.create(upstream + ex.getRequestURI()))
            .method(ex.getRequestMethod(), HttpRequest.BodyPublishers.ofByteArray(ex.getRequestBody().readAllBytes()));
        ex.getRequestHeaders().forEach((k, vs) -> {
          if (!restricted.contains(k.toLowerCase())) vs.forEach(v -> req.header(k, v));
        });
        HttpResponse<String> resp = http.send(req.build(), HttpResponse.BodyHandlers.ofString());
        String body = resp.body();
        String field = corrupt.get();
        if (field != null) {
          String broken = body.replaceAll("(\"" + field + "\"\\s*:\\s*\"|<" + field + ">)[0-9a-f]{32}", "$1" + WRONG);
          if (!broken.equals(body)) corrupted.incrementAndGet();
          body = broken;
        }
        resp.headers().firstValue("content-type").ifPresent(v -> ex.getResponseHeaders().set("Content-Type", v));
        resp.headers().allValues("x-amzn-requestid").forEach(v -> ex.getResponseHeaders().add("x-amzn-RequestId", v));
        byte[] out = body.getBytes(StandardCharsets.UTF_8);
        ex.sendResponseHeaders(resp.statusCode(), out.length);
        ex.getResponseBody().write(out);
      } catch (InterruptedException e) {
        ex.sendResponseHeaders(502, -1);
      } finally {
        ex.close();
      }
    });
    proxy.start();
    proxyEndpoint = "http://127.0.0.1:" + proxy.getAddress().getPort();
    direct = Clients.sync(upstream);
  }

  @AfterAll
  void stopProxy() {
    proxy.stop(0);
    direct.close();
  }

  @Test
  void v2RefusesAWrongDigestOfBodyOrAttributes() {
    String url = direct.createQueue(b -> b.queueName(Sqsim.uniqueName("md5v2"))).queueUrl();
    Map<String, MessageAttributeValue> attrs = Map.of("Foo", MessageAttributeValue.builder().dataType("String").stringValue("Bar").build());
    try (SqsClient viaProxy = Clients.sync(proxyEndpoint)) {
      corrupt.set(null);
      viaProxy.sendMessage(b -> b.queueUrl(url).messageBody("intact").messageAttributes(attrs));
      corrupt.set("MD5OfMessageBody");
      SdkClientException e = assertThrows(SdkClientException.class,
          () -> viaProxy.sendMessage(b -> b.queueUrl(url).messageBody("hello").messageAttributes(attrs)));
      assertTrue(e.getMessage().contains("MD5"), e.getMessage());
      corrupt.set("MD5OfMessageAttributes");
      e = assertThrows(SdkClientException.class,
          () -> viaProxy.sendMessage(b -> b.queueUrl(url).messageBody("hello").messageAttributes(attrs)));
      assertTrue(e.getMessage().contains("MD5"), e.getMessage());
      corrupt.set("MD5OfBody");
      e = assertThrows(SdkClientException.class,
          () -> viaProxy.receiveMessage(b -> b.queueUrl(url).maxNumberOfMessages(10).messageAttributeNames("All")));
      assertTrue(e.getMessage().contains("MD5"), e.getMessage());
    } finally {
      corrupt.set(null);
    }
    assertEquals(3, corrupted.getAndSet(0), "the proxy broke three answers");
  }

  @Test
  void v1QueryRefusesAWrongDigest() {
    // v1 sends each call to the host of its QueueUrl (QueueUrlHandler): the proxy's.
    String url = direct.createQueue(b -> b.queueName(Sqsim.uniqueName("md5v1"))).queueUrl()
        .replace(Sqsim.server().endpoint, proxyEndpoint);
    AmazonSQS v1 = AmazonSQSClientBuilder.standard()
        .withEndpointConfiguration(new EndpointConfiguration(proxyEndpoint, Sqsim.REGION))
        .withCredentials(new AWSStaticCredentialsProvider(new BasicAWSCredentials("AKIDTEST", "test-secret")))
        .withClientConfiguration(V1QueryTest.config())
        .build();
    try {
      corrupt.set(null);
      v1.sendMessage(url, "intact");
      corrupt.set("MD5OfMessageBody");
      AmazonClientException e = assertThrows(AmazonClientException.class, () -> v1.sendMessage(url, "hello"));
      assertTrue(e.getMessage().contains("MD5"), e.getMessage());
      corrupt.set("MD5OfBody");
      e = assertThrows(AmazonClientException.class, () -> v1.receiveMessage(url));
      assertTrue(e.getMessage().contains("MD5"), e.getMessage());
    } finally {
      corrupt.set(null);
      v1.shutdown();
    }
    assertEquals(2, corrupted.getAndSet(0), "the proxy broke two answers");
  }
}
