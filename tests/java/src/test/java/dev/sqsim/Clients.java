package dev.sqsim;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.net.URI;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.awscore.retry.AwsRetryStrategy;
import software.amazon.awssdk.core.interceptor.ExecutionInterceptor;
import software.amazon.awssdk.http.apache.ApacheHttpClient;
import software.amazon.awssdk.http.nio.netty.NettyNioAsyncHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.sqs.SqsAsyncClient;
import software.amazon.awssdk.services.sqs.SqsClient;

/** SDK v2 clients for a sqsim endpoint: no retries, the SDK's MD5 checks at their default (on). */
final class Clients {
  private Clients() {}

  static final StaticCredentialsProvider CREDENTIALS =
      StaticCredentialsProvider.create(AwsBasicCredentials.create("AKIDTEST", "test-secret"));

  static SqsClient sync(String endpoint, ExecutionInterceptor... interceptors) {
    return SqsClient.builder()
        .endpointOverride(URI.create(endpoint))
        .region(Region.US_EAST_1)
        .credentialsProvider(CREDENTIALS)
        .httpClient(ApacheHttpClient.builder().socketTimeout(Duration.ofSeconds(60)).build())
        .overrideConfiguration(o -> o.retryStrategy(AwsRetryStrategy.doNotRetry()).executionInterceptors(List.of(interceptors)))
        .build();
  }

  static SqsAsyncClient async(String endpoint, ExecutionInterceptor... interceptors) {
    return SqsAsyncClient.builder()
        .endpointOverride(URI.create(endpoint))
        .region(Region.US_EAST_1)
        .credentialsProvider(CREDENTIALS)
        .httpClientBuilder(NettyNioAsyncHttpClient.builder().readTimeout(Duration.ofSeconds(60)).maxConcurrency(64))
        .overrideConfiguration(o -> o.retryStrategy(AwsRetryStrategy.doNotRetry()).executionInterceptors(List.of(interceptors)))
        .build();
  }

  /**
   * The async client seen as an SqsClient: each call goes to the async method of the same name
   * and parameter types and waits for its future; a failed future throws its cause (the typed
   * SqsException), as the sync client would.
   */
  static SqsClient blocking(SqsAsyncClient async) {
    InvocationHandler h = (proxy, method, args) -> {
      if (method.getDeclaringClass() == Object.class) {
        return switch (method.getName()) {
          case "toString" -> "blocking(" + async + ")";
          case "hashCode" -> System.identityHashCode(proxy);
          case "equals" -> proxy == args[0];
          default -> throw new UnsupportedOperationException(method.getName());
        };
      }
      Method target = SqsAsyncClient.class.getMethod(method.getName(), method.getParameterTypes());
      Object result;
      try {
        result = target.invoke(async, args);
      } catch (InvocationTargetException e) {
        throw e.getCause();
      }
      if (result instanceof CompletableFuture<?> f) {
        try {
          return f.get();
        } catch (ExecutionException | CompletionException e) {
          throw e.getCause();
        }
      }
      return result;
    };
    return (SqsClient) Proxy.newProxyInstance(SqsClient.class.getClassLoader(), new Class<?>[] {SqsClient.class}, h);
  }
}
