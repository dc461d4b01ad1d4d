// What Java and Kafka make of client certificates, for tests/kafka/test_identity_java.py. Run from source with the
// broker's jars (JEP 330, no build step):
//   java -cp "$KAFKA_HOME/libs/*" IdentityProbe.java RULES_FILE CERT.pem...
// RULES_FILE holds one rule set per line, hex-encoded UTF-8. For each certificate it prints one line
// "N <hex of getSubjectX500Principal().getName()>", then per rule set "R <hex of the mapped name>" or
// "E <simple class name of the exception>".

import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.util.HexFormat;
import java.util.List;

import org.apache.kafka.common.security.ssl.SslPrincipalMapper;

public class IdentityProbe {
    public static void main(String[] args) throws Exception {
        HexFormat hex = HexFormat.of();
        List<String> ruleSets = Files.readAllLines(Path.of(args[0])).stream()
                .map(line -> new String(hex.parseHex(line.trim()), StandardCharsets.UTF_8)).toList();
        CertificateFactory factory = CertificateFactory.getInstance("X.509");
        for (int i = 1; i < args.length; i++) {
            X509Certificate certificate;
            try (InputStream in = Files.newInputStream(Path.of(args[i]))) {
                certificate = (X509Certificate) factory.generateCertificate(in);
            }
            String dn = certificate.getSubjectX500Principal().getName();
            System.out.println("N " + hex.formatHex(dn.getBytes(StandardCharsets.UTF_8)));
            for (String rules : ruleSets) {
                try {
                    String name = SslPrincipalMapper.fromRules(rules).getName(dn);
                    System.out.println("R " + hex.formatHex(name.getBytes(StandardCharsets.UTF_8)));
                } catch (Exception e) {
                    System.out.println("E " + e.getClass().getSimpleName());
                }
            }
        }
    }
}
