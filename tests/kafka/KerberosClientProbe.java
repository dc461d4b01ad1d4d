// Kafka's Java AdminClient logging in with SASL/GSSAPI (JAAS Krb5LoginModule with a keytab), for
// tests/kafka/test_kerberos_kafka.py. Run from source with the broker's jars (JEP 330, no build step):
//   java -Djava.security.krb5.conf=KRB5_CONF -cp "$KAFKA_HOME/libs/*" KerberosClientProbe.java BOOTSTRAP ASKS_FILE
// ASKS_FILE: one ask a line, tab-separated: probe topic, Kerberos principal, its keytab. Each client describes its
// probe topic (no ACL covers it: the server denies it, and logs the principal that asked). The asks run in parallel.
// Output, one line an ask, tab-separated: topic, then "ANSWERED" with the exception the describe failed with (a
// TopicAuthorizationException: logged in), or "FAILED" with the exception's class (no login).

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

public class KerberosClientProbe {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        List<String[]> asks = new ArrayList<>();
        for (String line : Files.readAllLines(Path.of(args[1]))) {
            if (!line.isEmpty())
                asks.add(line.split("\t", 3));
        }
        ExecutorService pool = Executors.newFixedThreadPool(8);
        List<Future<String>> outcomes = new ArrayList<>();
        for (String[] ask : asks)
            outcomes.add(pool.submit(() -> ask(bootstrap, ask[0], ask[1], ask[2])));
        for (Future<String> outcome : outcomes)
            System.out.println(outcome.get());
        pool.shutdown();
    }

    private static String ask(String bootstrap, String topic, String principal, String keytab) {
        Properties config = new Properties();
        config.put("bootstrap.servers", bootstrap);
        config.put("security.protocol", "SASL_PLAINTEXT");
        config.put("sasl.mechanism", "GSSAPI");
        config.put("sasl.kerberos.service.name", "kafka");
        config.put("sasl.jaas.config", "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
                + "storeKey=true useTicketCache=false keyTab=\"" + keytab + "\" principal=\"" + principal + "\";");
        config.put("request.timeout.ms", "3000");
        config.put("default.api.timeout.ms", "6000");
        config.put("reconnect.backoff.max.ms", "500");
        try (Admin admin = Admin.create(config)) {
            admin.describeTopics(List.of(topic)).allTopicNames().get();
            return topic + "\tANSWERED\tnone";
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof TopicAuthorizationException || cause instanceof UnknownTopicOrPartitionException)
                return topic + "\tANSWERED\t" + cause.getClass().getSimpleName();
            return topic + "\tFAILED\t" + cause.getClass().getSimpleName();
        } catch (Exception e) {
            return topic + "\tFAILED\t" + e.getClass().getSimpleName();
        }
    }
}
