// Java's own KafkaConsumer as a consume load for benchmarks/bench_kip848.py: one member subscribes to a topic and
// reads COUNT records from its earliest offset, on the group protocol it is given (classic | consumer, KIP-848).
// Compiled by the benchmark with the installed JDK against the Kafka distribution's jars, into a temporary directory:
//   javac -cp "$KAFKA_HOME/libs/*" -d OUT ConsumeLoad.java
//   java -cp "OUT:$KAFKA_HOME/libs/*" ConsumeLoad BOOTSTRAP USER PASSWORD TOPIC GROUP PROTOCOL COUNT
// SCRAM-SHA-512 over SASL_PLAINTEXT. Output on stdout, two lines, each flushed at once, so that the benchmark can meter
// the proxy over the timed loop alone:
//   BEGIN                           when the first records arrived (JVM start, login, group join and the first fetch
//                                   are behind it, and are not timed)
//   RESULT {"received": …, "messages": …, "bytes": …, "seconds": …, "startup_seconds": …}
// received: every record read (at least COUNT: the last poll may bring more); messages and bytes (record values) after the first batch, seconds from the first batch to the last record (as
// benchmarks/kafka_load.py counts a confluent-kafka consumer), startup_seconds from subscribe to the first batch.
// The member then leaves the group (close, not timed). Any failure: "ERROR <class>: <message>" and exit status 1.

import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;

public class ConsumeLoad {
    /** Give up when no record arrives for this long (a dead proxy must not hang the benchmark). */
    static final long STALL_MS = 30_000;

    public static void main(String[] args) {
        if (args.length != 7) {
            System.out.println("ERROR usage: ConsumeLoad BOOTSTRAP USER PASSWORD TOPIC GROUP classic|consumer COUNT");
            System.exit(2);
        }
        try {
            run(args[0], args[1], args[2], args[3], args[4], args[5], Long.parseLong(args[6]));
        } catch (Exception e) {
            System.out.println("ERROR " + e.getClass().getSimpleName() + ": " + e.getMessage());
            System.out.flush();
            System.exit(1);
        }
    }

    static Properties config(String bootstrap, String user, String password, String group, String protocol) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("security.protocol", "SASL_PLAINTEXT");
        props.put("sasl.mechanism", "SCRAM-SHA-512");
        props.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                + user + "\" password=\"" + password + "\";");
        props.put("client.id", "kafkaguard-bench-java");
        props.put("group.id", group);
        props.put("group.protocol", protocol);
        props.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        props.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        // as benchmarks/kafka_load.py's CONSUMER spells them for confluent-kafka, so both kinds of client fetch alike
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        props.put("fetch.min.bytes", "1");
        props.put("fetch.max.wait.ms", "100");
        props.put("fetch.max.bytes", String.valueOf(50 * 1024 * 1024));
        props.put("max.partition.fetch.bytes", String.valueOf(1024 * 1024));
        props.put("check.crcs", "false");
        props.put("max.poll.records", "1000");
        return props;
    }

    static void run(String bootstrap, String user, String password, String topic, String group, String protocol,
                    long count) {
        try (KafkaConsumer<byte[], byte[]> consumer =
                     new KafkaConsumer<>(config(bootstrap, user, password, group, protocol))) {
            consumer.subscribe(List.of(topic));
            long subscribed = System.nanoTime();
            long firstAt = 0, lastAt = 0, received = 0, firstBatch = 0, bytes = 0;
            long progressAt = subscribed;
            while (received < count) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
                long now = System.nanoTime();
                if (records.isEmpty()) {
                    if ((now - progressAt) / 1_000_000 > STALL_MS) {
                        throw new IllegalStateException(received + "/" + count + " records, none for "
                                + STALL_MS / 1000 + " s");
                    }
                    continue;
                }
                progressAt = now;
                if (received == 0) {
                    firstAt = now;
                    firstBatch = records.count();
                    System.out.println("BEGIN");
                    System.out.flush();
                } else {
                    for (ConsumerRecord<byte[], byte[]> record : records) {
                        bytes += record.value() == null ? 0 : record.value().length;
                    }
                }
                received += records.count();
                lastAt = now;
            }
            System.out.println("RESULT {\"received\": " + received + ", \"messages\": " + (received - firstBatch)
                    + ", \"bytes\": " + bytes
                    + ", \"seconds\": " + (lastAt - firstAt) / 1e9 + ", \"startup_seconds\": "
                    + (firstAt - subscribed) / 1e9 + "}");
            System.out.flush();
        }
    }
}
