// Java's own clients on the APIs that name topics by id, for tests/kafka/proxy/test_proxy_topic_ids_java.py. Run from
// source with the broker's jars (JEP 330, no build step):
//   java -cp "$KAFKA_HOME/libs/*" TopicIdsProbe.java BOOTSTRAP USER PASSWORD MODE ARG...
// Modes (one line per argument, "I <outcome>", I the argument's index, so two runs with other names compare equal):
//   describe NAME...      AdminClient.describeTopics(names): DescribeTopicPartitions (KIP-966) since 3.8;
//                         "OK <partitions> <internal>" or "ERROR <exception class>"
//   describe-ids UUID...  AdminClient.describeTopics(TopicCollection.ofTopicIds): Metadata v12 by id
//   ids NAME...           the topic ids of NAME..., "I <uuid>" (describeTopics by name), for the other modes
//   delete-ids UUID...    AdminClient.deleteTopics(TopicCollection.ofTopicIds): DeleteTopics v6; "OK" or "ERROR …"
//   consume NAME COUNT    a classic-protocol KafkaConsumer (Fetch v13+: topics by id) assigned every partition of
//                         NAME from the beginning, no group: "0 RECORDS <n>" (n >= COUNT) or "0 ERROR <class>"

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class TopicIdsProbe {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("security.protocol", "SASL_PLAINTEXT");
        props.put("sasl.mechanism", "SCRAM-SHA-256");
        props.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                + args[1] + "\" password=\"" + args[2] + "\";");
        props.put("default.api.timeout.ms", "30000");
        props.put("request.timeout.ms", "20000");
        String mode = args[3];
        List<String> rest = Arrays.asList(args).subList(4, args.length);
        if (mode.equals("consume")) {
            consume(props, rest.get(0), Integer.parseInt(rest.get(1)));
            return;
        }
        try (Admin admin = Admin.create(props)) {
            switch (mode) {
                case "describe" -> {
                    Map<String, KafkaFuture<TopicDescription>> described =
                            admin.describeTopics(rest).topicNameValues();
                    for (int i = 0; i < rest.size(); i++) {
                        System.out.println(i + " " + outcome(described.get(rest.get(i))));
                    }
                }
                case "ids" -> {
                    Map<String, KafkaFuture<TopicDescription>> described =
                            admin.describeTopics(rest).topicNameValues();
                    for (int i = 0; i < rest.size(); i++) {
                        System.out.println(i + " " + described.get(rest.get(i)).get().topicId());
                    }
                }
                case "describe-ids" -> {
                    List<Uuid> ids = rest.stream().map(Uuid::fromString).toList();
                    Map<Uuid, KafkaFuture<TopicDescription>> described =
                            admin.describeTopics(TopicCollection.ofTopicIds(ids)).topicIdValues();
                    for (int i = 0; i < ids.size(); i++) {
                        System.out.println(i + " " + outcome(described.get(ids.get(i))));
                    }
                }
                case "delete-ids" -> {
                    List<Uuid> ids = rest.stream().map(Uuid::fromString).toList();
                    Map<Uuid, KafkaFuture<Void>> deleted =
                            admin.deleteTopics(TopicCollection.ofTopicIds(ids)).topicIdValues();
                    for (int i = 0; i < ids.size(); i++) {
                        System.out.println(i + " " + done(deleted.get(ids.get(i))));
                    }
                }
                default -> throw new IllegalArgumentException("unknown mode " + mode);
            }
        }
    }

    static String outcome(KafkaFuture<TopicDescription> future) {
        try {
            TopicDescription d = future.get(60, TimeUnit.SECONDS);
            return "OK " + d.partitions().size() + " " + d.isInternal();
        } catch (ExecutionException e) {
            return "ERROR " + e.getCause().getClass().getSimpleName();
        } catch (Exception e) {
            return "ERROR " + e.getClass().getSimpleName();
        }
    }

    static String done(KafkaFuture<Void> future) {
        try {
            future.get(60, TimeUnit.SECONDS);
            return "OK";
        } catch (ExecutionException e) {
            return "ERROR " + e.getCause().getClass().getSimpleName();
        } catch (Exception e) {
            return "ERROR " + e.getClass().getSimpleName();
        }
    }

    static void consume(Properties props, String topic, int count) {
        props.put("group.protocol", "classic");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
                partitions.add(new TopicPartition(topic, info.partition()));
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            int seen = 0;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (seen < count && System.nanoTime() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(500));
                seen += records.count();
            }
            System.out.println("0 RECORDS " + seen);
        } catch (Exception e) {
            System.out.println("0 ERROR " + e.getClass().getSimpleName());
        }
    }
}
