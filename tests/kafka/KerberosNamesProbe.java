// What Kafka makes of Kerberos principals under sasl.kerberos.principal.to.local.rules, for
// tests/kafka/test_kerberos_names_java.py. Run from source with the broker's jars (JEP 330, no build step):
//   java -cp "$KAFKA_HOME/libs/*" KerberosNamesProbe.java DEFAULT_REALM RULES_FILE NAMES_FILE
// RULES_FILE holds one rule list per line: hex-encoded UTF-8 rules joined by commas ("-" for an empty list).
// NAMES_FILE holds one hex-encoded principal per line. Per rule list it prints "P <exception class>" when the rules
// do not parse, else "P ok" and then per name "R <hex of the short name>" or "E <simple class name>".

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

import org.apache.kafka.common.security.kerberos.KerberosName;
import org.apache.kafka.common.security.kerberos.KerberosShortNamer;

public class KerberosNamesProbe {
    public static void main(String[] args) throws Exception {
        HexFormat hex = HexFormat.of();
        String realm = args[0];
        List<String> names = new ArrayList<>();
        for (String line : Files.readAllLines(Path.of(args[2]))) {
            names.add(new String(hex.parseHex(line.trim()), StandardCharsets.UTF_8));
        }
        for (String line : Files.readAllLines(Path.of(args[1]))) {
            List<String> rules = new ArrayList<>();
            if (!line.trim().equals("-")) {
                for (String rule : line.trim().split(",", -1)) {
                    rules.add(new String(hex.parseHex(rule), StandardCharsets.UTF_8));
                }
            }
            KerberosShortNamer namer;
            try {
                namer = KerberosShortNamer.fromUnparsedRules(realm, rules);
            } catch (Exception e) {
                System.out.println("P " + e.getClass().getSimpleName());
                continue;
            }
            System.out.println("P ok");
            for (String name : names) {
                try {
                    String shortName = namer.shortName(KerberosName.parse(name));
                    System.out.println("R " + hex.formatHex(shortName.getBytes(StandardCharsets.UTF_8)));
                } catch (Exception e) {
                    System.out.println("E " + e.getClass().getSimpleName());
                }
            }
        }
    }
}
