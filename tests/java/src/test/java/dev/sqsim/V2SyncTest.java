package dev.sqsim;

import java.util.ArrayList;
import java.util.List;
import software.amazon.awssdk.services.sqs.SqsClient;

/** The matrix through the SDK for Java v2's sync client (Apache HTTP client). */
class V2SyncTest extends V2Matrix {
  @Override
  protected SqsClient newClient() {
    return Clients.sync(Sqsim.server().endpoint);
  }

  @Override
  protected List<String> paginateQueues(String prefix, int pageSize) {
    List<String> out = new ArrayList<>();
    sqs.listQueuesPaginator(b -> b.queueNamePrefix(prefix).maxResults(pageSize)).queueUrls().forEach(out::add);
    return out;
  }

  @Override
  protected List<String> paginateDeadLetterSources(String dlqUrl, int pageSize) {
    List<String> out = new ArrayList<>();
    sqs.listDeadLetterSourceQueuesPaginator(b -> b.queueUrl(dlqUrl).maxResults(pageSize)).queueUrls().forEach(out::add);
    return out;
  }
}
