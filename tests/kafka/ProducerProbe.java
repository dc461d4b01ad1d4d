// Produces through Kafka's own Java producer (kafka-clients 3.9: Produce v11, KIP-951 leader discovery), for the
// proxy's tests: SCRAM-SHA-512 over SASL_PLAINTEXT, acks=all, idempotent (the producer's default).
//
// Usage: java -cp "<kafka>/libs/*" ProducerProbe.java BOOTSTRAP USER PASSWORD TOPIC COUNT
// Output: "SENT <n>" once every record is acknowledged, else "FAILED <exception class>: <message>" (exit 1).
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

public class ProducerProbe {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("security.protocol", "SASL_PLAINTEXT");
        props.put("sasl.mechanism", "SCRAM-SHA-512");
        props.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
            + args[1] + "\" password=\"" + args[2] + "\";");
        props.put("acks", "all");
        props.put("delivery.timeout.ms", "30000");
        props.put("request.timeout.ms", "20000");
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        int count = Integer.parseInt(args[4]);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++)
                sent.add(producer.send(new ProducerRecord<>(args[3], "k" + i, "v" + i)));
            for (Future<RecordMetadata> future : sent)
                future.get(40, TimeUnit.SECONDS);
            System.out.println("SENT " + count);
        } catch (Exception e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            System.out.println("FAILED " + cause.getClass().getSimpleName() + ": " + cause.getMessage());
            System.exit(1);
        }
    }
}
