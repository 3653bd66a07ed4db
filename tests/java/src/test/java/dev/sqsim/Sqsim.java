package dev.sqsim;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * The one launcher of sqsim for the Java suites, the same rules as tests/python/sqsim_process.py
 * and tests/node/helpers.mjs: `$SQSIM_BIN --host 127.0.0.1 --port 0` (default: the debug build of
 * this checkout), its listen line read from stdout, /_sqsim/health waited for; one server for the
 * whole test run, stopped with SIGTERM when the run ends and required to exit 0. With
 * $SQSIM_TEST_ENDPOINT set, that running server is tested instead (and left running). Also: the
 * admin clock, unique queue names and the SQS digests computed independently of the server.
 */
public final class Sqsim implements BeforeAllCallback {
  public static final String ACCOUNT = "000000000000";
  public static final String REGION = "us-east-1";
  private static final Pattern LISTEN = Pattern.compile("sqsim listening on (http://\\S+)");
  private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private static final AtomicInteger COUNTER = new AtomicInteger();

  private static Sqsim instance;

  private final Process process;
  private final Path log;
  public final String endpoint;

  /** The JUnit extension: registered on each test class, it starts the server once per run. */
  public Sqsim() {
    this.process = null;
    this.log = null;
    this.endpoint = null;
  }

  private Sqsim(Process process, Path log, String endpoint) {
    this.process = process;
    this.log = log;
    this.endpoint = endpoint;
  }

  @Override
  public void beforeAll(ExtensionContext context) {
    context.getRoot().getStore(ExtensionContext.Namespace.GLOBAL).getOrComputeIfAbsent(
        Sqsim.class.getName(), k -> new Stopper());
    server();
  }

  /** Stops the run's server when the test run ends (the root store closes its resources). */
  private static final class Stopper implements ExtensionContext.Store.CloseableResource, AutoCloseable {
    @Override
    public void close() throws Exception {
      stop();
    }
  }

  /** The run's server, started on first use. */
  public static synchronized Sqsim server() {
    if (instance == null) instance = start();
    return instance;
  }

  private static Sqsim start() {
    String external = System.getenv("SQSIM_TEST_ENDPOINT");
    if (external != null && !external.isEmpty()) {
      return new Sqsim(null, null, external.replaceAll("/+$", ""));
    }
    String bin = System.getenv("SQSIM_BIN");
    if (bin == null || bin.isEmpty()) bin = Paths.get("../../target/debug/sqsim").toAbsolutePath().normalize().toString();
    if (!Files.isExecutable(Paths.get(bin))) {
      throw new IllegalStateException("SQSIM_BIN " + bin + " is not an executable; build sqsim first");
    }
    try {
      Path log = Files.createTempFile("sqsim-java-", ".log");
      ProcessBuilder pb = new ProcessBuilder(bin, "--host", "127.0.0.1", "--port", "0");
      // sqsim's settings are dropped from its environment: its flags are the whole story.
      pb.environment().keySet().removeIf(k -> k.startsWith("SQSIM_")
          || List.of("SQS_ENDPOINT_STRATEGY", "LOCALSTACK_HOST", "PERSISTENCE").contains(k));
      pb.environment().putIfAbsent("RUST_LOG", "warn");
      pb.redirectError(log.toFile());
      Process p = pb.start();
      // A safety net: the JVM never leaves its server behind, however it ends.
      Runtime.getRuntime().addShutdownHook(new Thread(p::destroy));
      CompletableFuture<String> endpoint = CompletableFuture.supplyAsync(() -> {
        try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
          String line;
          while ((line = r.readLine()) != null) {
            Matcher m = LISTEN.matcher(line);
            if (m.find()) {
              Thread drain = new Thread(() -> {
                try {
                  r.transferTo(java.io.Writer.nullWriter());
                } catch (IOException ignored) {
                  // the server went away
                }
              });
              drain.setDaemon(true);
              drain.start();
              return m.group(1);
            }
          }
          return null;
        } catch (IOException e) {
          return null;
        }
      });
      String ep = endpoint.get(20, TimeUnit.SECONDS);
      if (ep == null) throw new IllegalStateException("sqsim printed no listen line: " + Files.readString(log));
      Sqsim s = new Sqsim(p, log, ep);
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
      while (true) {
        try {
          if (s.http("GET", "/_sqsim/health", null).body().contains("\"ok\"")) break;
        } catch (IOException e) {
          // not yet
        }
        if (System.nanoTime() > deadline) throw new IllegalStateException("sqsim did not become healthy");
        Thread.sleep(50);
      }
      return s;
    } catch (Exception e) {
      throw new IllegalStateException("cannot start sqsim: " + e, e);
    }
  }

  private static synchronized void stop() throws Exception {
    Sqsim s = instance;
    instance = null;
    if (s == null || s.process == null) return;
    s.process.destroy(); // SIGTERM
    if (!s.process.waitFor(10, TimeUnit.SECONDS)) {
      s.process.destroyForcibly().waitFor();
    }
    int code = s.process.exitValue();
    if (code != 0) {
      throw new AssertionError("sqsim exited with " + code + " on SIGTERM; log: " + Files.readString(s.log));
    }
    Files.deleteIfExists(s.log);
  }

  public String queueUrl(String name) {
    return endpoint + "/" + ACCOUNT + "/" + name;
  }

  public static String arn(String name) {
    return "arn:aws:sqs:" + REGION + ":" + ACCOUNT + ":" + name;
  }

  public HttpResponse<String> http(String method, String path, String json) throws IOException, InterruptedException {
    HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(endpoint + path)).timeout(Duration.ofSeconds(30));
    if (json == null) {
      b.method(method, HttpRequest.BodyPublishers.noBody());
    } else {
      b.header("content-type", "application/json").method(method, HttpRequest.BodyPublishers.ofString(json));
    }
    return HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  /** An admin call; requires 200 and returns the JSON reply as text. */
  public String admin(String method, String path, String json) {
    try {
      HttpResponse<String> r = http(method, path, json);
      if (r.statusCode() != 200) throw new AssertionError(method + " " + path + " -> " + r.statusCode() + ": " + r.body());
      return r.body();
    } catch (IOException | InterruptedException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Moves the server's virtual clock forward. */
  public void advance(long seconds) {
    admin("POST", "/_sqsim/clock", "{\"advance_seconds\":" + seconds + "}");
  }

  public long nowMs() {
    Matcher m = Pattern.compile("\"now_ms\"\\s*:\\s*(\\d+)").matcher(admin("GET", "/_sqsim/clock", null));
    if (!m.find()) throw new AssertionError("no now_ms in the clock's reply");
    return Long.parseLong(m.group(1));
  }

  /** Freezes (true) or releases (false) the virtual clock. */
  public void freeze(boolean frozen) {
    String reply = admin("POST", "/_sqsim/clock", "{\"freeze\":" + frozen + "}");
    if (!reply.replace(" ", "").contains("\"frozen\":" + frozen)) throw new AssertionError("freeze not applied: " + reply);
  }

  /** A queue name unique within this run. */
  public static String uniqueName(String prefix) {
    return prefix + "-" + ProcessHandle.current().pid() + "-" + COUNTER.incrementAndGet();
  }

  public static String md5Hex(byte[] data) {
    try {
      return HexFormat.of().formatHex(MessageDigest.getInstance("MD5").digest(data));
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  public static String md5Hex(String s) {
    return md5Hex(s.getBytes(StandardCharsets.UTF_8));
  }

  public static String sha256Hex(String s) {
    try {
      return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8)));
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  /** One message attribute, SDK-neutral: a string value or a binary one. */
  public record Attr(String dataType, String string, byte[] binary) {
    public static Attr str(String type, String value) {
      return new Attr(type, value, null);
    }

    public static Attr bin(String type, byte[] value) {
      return new Attr(type, null, value);
    }
  }

  /**
   * MD5OfMessageAttributes as SQS computes it (docs/sqs-reference: names sorted by their UTF-8
   * bytes; per attribute len+name, len+DataType, transport byte 1 string / 2 binary, len+value).
   */
  public static String md5OfAttributes(Map<String, Attr> attrs) {
    if (attrs.isEmpty()) return null;
    List<String> names = new ArrayList<>(attrs.keySet());
    names.sort(Comparator.comparing(n -> n.getBytes(StandardCharsets.UTF_8), java.util.Arrays::compareUnsigned));
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
    for (String n : names) {
      Attr a = attrs.get(n);
      lenPrefixed(out, n.getBytes(StandardCharsets.UTF_8));
      lenPrefixed(out, a.dataType().getBytes(StandardCharsets.UTF_8));
      if (a.binary() != null) {
        out.write(2);
        lenPrefixed(out, a.binary());
      } else {
        out.write(1);
        lenPrefixed(out, a.string().getBytes(StandardCharsets.UTF_8));
      }
    }
    return md5Hex(out.toByteArray());
  }

  private static void lenPrefixed(java.io.ByteArrayOutputStream out, byte[] b) {
    out.writeBytes(ByteBuffer.allocate(4).putInt(b.length).array());
    out.writeBytes(b);
  }

  /** A body that breaks naive XML/JSON handling (the Node suite's TRICKY_BODY). */
  public static final String TRICKY_BODY = "line1\r\nline2\rline3\n\"double\" 'single' &quot; <tag> & \\ back\\slash \t tab "
      + "héllo wörld ñ 日本語 Ελληνικά 🚀👍🏽 " + new String(Character.toChars(0x10FFFF)) + " \uE000 end\r";

  /** Bytes that are not UTF-8 (0xfe, 0xff, a lone 0x80). */
  public static final byte[] NON_UTF8 = {0x00, 0x01, (byte) 0xfe, (byte) 0xff, 0x0d, 0x0a, 0x22, (byte) 0x80};
}
