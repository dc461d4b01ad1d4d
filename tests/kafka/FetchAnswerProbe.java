import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.List;

import org.apache.kafka.common.message.FetchResponseData;
import org.apache.kafka.common.requests.FetchResponse;

/**
 * Reads Fetch answers with Kafka's own client parser (kafka-clients, the broker's jars): each line of the file given
 * is "version hex-of-the-body" (the body after the response header). For each, one line: the node endpoints Java
 * sees ("id host:port rack", joined by ";", or "-" for none), then per partition "partition error leader/epoch",
 * then how many unknown top-level tagged fields it kept. A line "ERROR …" when the parser refuses the bytes.
 */
public class FetchAnswerProbe {
    public static void main(String[] args) throws Exception {
        List<String> lines = Files.readAllLines(Path.of(args[0]));
        for (String line : lines) {
            String[] parts = line.split(" ");
            short version = Short.parseShort(parts[0]);
            byte[] body = HexFormat.of().parseHex(parts[1]);
            try {
                FetchResponseData data = FetchResponse.parse(ByteBuffer.wrap(body), version).data();
                StringBuilder out = new StringBuilder();
                StringBuilder endpoints = new StringBuilder();
                for (FetchResponseData.NodeEndpoint e : data.nodeEndpoints()) {
                    if (endpoints.length() > 0) endpoints.append(';');
                    endpoints.append(e.nodeId()).append(' ').append(e.host()).append(':').append(e.port())
                        .append(' ').append(e.rack());
                }
                out.append(endpoints.length() == 0 ? "-" : endpoints.toString());
                for (FetchResponseData.FetchableTopicResponse topic : data.responses()) {
                    for (FetchResponseData.PartitionData p : topic.partitions()) {
                        out.append(" | ").append(p.partitionIndex()).append(' ').append(p.errorCode()).append(' ')
                            .append(p.currentLeader().leaderId()).append('/').append(p.currentLeader().leaderEpoch());
                    }
                }
                out.append(" | unknown tags ").append(data.unknownTaggedFields().size());
                System.out.println(out);
            } catch (RuntimeException e) {
                System.out.println("ERROR " + e);
            }
        }
    }
}
