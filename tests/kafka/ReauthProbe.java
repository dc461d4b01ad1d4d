// Kafka's Java AdminClient asking DescribeCluster every INTERVAL_MS for DURATION_MS, for the re-authentication tests
// (tests/kafka/test_reauthentication.py). Run from source with the broker's own jars (JEP 330, no build step):
//   java -cp "$KAFKA_HOME/libs/*" ReauthProbe.java BOOTSTRAP USER PASSWORD DURATION_MS INTERVAL_MS
// Prints "ok N" (N calls, all answered) and exits 0, or prints the failure and exits 1.

import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;

public class ReauthProbe {
    public static void main(String[] args) throws Exception {
        Properties config = new Properties();
        config.put("bootstrap.servers", args[0]);
        config.put("security.protocol", "SASL_PLAINTEXT");
        config.put("sasl.mechanism", "SCRAM-SHA-256");
        config.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                + args[1] + "\" password=\"" + args[2] + "\";");
        config.put("default.api.timeout.ms", "10000");
        config.put("request.timeout.ms", "5000");
        long until = System.currentTimeMillis() + Long.parseLong(args[3]);
        long interval = Long.parseLong(args[4]);
        int calls = 0;
        try (Admin admin = Admin.create(config)) {
            while (System.currentTimeMillis() < until) {
                try {
                    admin.describeCluster().nodes().get(10, TimeUnit.SECONDS);
                } catch (Exception e) {
                    System.out.println("failed after " + calls + " calls: " + e);
                    System.exit(1);
                }
                calls++;
                Thread.sleep(interval);
            }
        }
        System.out.println("ok " + calls);
    }
}
