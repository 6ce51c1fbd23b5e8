// POST /v1/embeddings N times with the JDK's HttpClient as applications use it (test_server_http2.py).
//
//   java JdkHttpClientProbe.java BASE_URL BODY_JSON N [CERT_PEM]
//
// Over http:// the client is HttpClient.newHttpClient(): the JDK defaults, HTTP/2 preferred, so the
// first request of a connection offers "Upgrade: h2c". Over https:// the same defaults with an
// SSLContext that trusts CERT_PEM (the test's self-signed certificate); ALPN offers h2. Even requests
// send the body with a length (Content-Length), odd ones from a stream of unknown length (chunked on
// HTTP/1.1, DATA frames on HTTP/2). One client for every request: its connections are reused.
// Prints one line a request: "length|stream STATUS VERSION BASE64_OF_THE_BODY".

import java.io.ByteArrayInputStream;
import java.io.FileInputStream;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import java.util.Base64;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

public class JdkHttpClientProbe {
    public static void main(String[] args) throws Exception {
        String base = args[0];
        byte[] body = args[1].getBytes(StandardCharsets.UTF_8);
        int n = Integer.parseInt(args[2]);
        HttpClient client;
        if (args.length > 3) {
            KeyStore trusted = KeyStore.getInstance(KeyStore.getDefaultType());
            trusted.load(null, null);
            try (InputStream in = new FileInputStream(args[3])) {
                trusted.setCertificateEntry("densewire-test", CertificateFactory.getInstance("X.509").generateCertificate(in));
            }
            TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            tmf.init(trusted);
            SSLContext tls = SSLContext.getInstance("TLS");
            tls.init(null, tmf.getTrustManagers(), null);
            client = HttpClient.newBuilder().sslContext(tls).build();
        } else {
            client = HttpClient.newHttpClient();
        }
        for (int i = 0; i < n; i++) {
            boolean stream = i % 2 == 1;
            HttpRequest.BodyPublisher publisher = stream
                    ? HttpRequest.BodyPublishers.ofInputStream(() -> new ByteArrayInputStream(body))
                    : HttpRequest.BodyPublishers.ofByteArray(body);
            HttpRequest request = HttpRequest.newBuilder(URI.create(base + "/v1/embeddings"))
                    .header("Content-Type", "application/json")
                    .header("Accept", "application/octet-stream")
                    .POST(publisher)
                    .build();
            HttpResponse<byte[]> response = client.send(request, HttpResponse.BodyHandlers.ofByteArray());
            System.out.println((stream ? "stream" : "length") + " " + response.statusCode() + " " + response.version()
                    + " " + Base64.getEncoder().encodeToString(response.body()));
        }
    }
}
