package dev.sqsim;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import software.amazon.awssdk.services.sqs.SqsAsyncClient;
import software.amazon.awssdk.services.sqs.SqsClient;

/** The matrix through the SDK for Java v2's async client (Netty), its paginators as Publishers. */
class V2AsyncTest extends V2Matrix {
  private final List<SqsAsyncClient> asyncClients = Collections.synchronizedList(new ArrayList<>());

  @Override
  protected SqsClient newClient() {
    SqsAsyncClient c = Clients.async(Sqsim.server().endpoint);
    asyncClients.add(c);
    return Clients.blocking(c);
  }

  @AfterAll
  void closeAsync() {
    asyncClients.forEach(SqsAsyncClient::close);
  }

  @Override
  protected List<String> paginateQueues(String prefix, int pageSize) {
    List<String> out = Collections.synchronizedList(new ArrayList<>());
    asyncClients.get(0).listQueuesPaginator(b -> b.queueNamePrefix(prefix).maxResults(pageSize)).queueUrls().subscribe(out::add).join();
    return out;
  }

  @Override
  protected List<String> paginateDeadLetterSources(String dlqUrl, int pageSize) {
    List<String> out = Collections.synchronizedList(new ArrayList<>());
    asyncClients.get(0).listDeadLetterSourceQueuesPaginator(b -> b.queueUrl(dlqUrl).maxResults(pageSize)).queueUrls()
        .subscribe(out::add).join();
    return out;
  }
}
