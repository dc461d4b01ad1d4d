// Runs OAUTHBEARER exchanges through Kafka's own OAuthBearerSaslServer, no broker needed: its callback handler is an
// OAuthBearerValidatorCallbackHandler on a JwksFileVerificationKeyResolver (as TokenProbe.java), so the server
// parses the client's responses with Kafka's OAuthBearerClientInitialResponse and validates tokens as a broker does.
//
// Usage: java -cp "<kafka>/libs/*" SaslProbe.java JWKS_FILE AUDIENCE ISSUER CLOCK_SKEW_SECONDS CASES_FILE
// CASES_FILE: one exchange a line, tab-separated: name, then each client response in hex.
// Output, one line an exchange: name, then per response "CHALLENGE:<hex>" or "COMPLETE:<principal>" or
// "THROWN:<exception class>:<message>" (the exchange stops there), tab-separated.
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.HashMap;

import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler;
import org.apache.kafka.common.security.oauthbearer.internals.OAuthBearerSaslServer;
import org.apache.kafka.common.security.oauthbearer.internals.secured.AccessTokenValidator;
import org.apache.kafka.common.security.oauthbearer.internals.secured.AccessTokenValidatorFactory;
import org.apache.kafka.common.security.oauthbearer.internals.secured.JwksFileVerificationKeyResolver;

public class SaslProbe {
    public static void main(String[] args) throws Exception {
        Path jwks = Path.of(args[0]);
        Map<String, Object> configs = new HashMap<>();
        configs.put(SaslConfigs.SASL_OAUTHBEARER_JWKS_ENDPOINT_URL, jwks.toUri().toString());
        configs.put(SaslConfigs.SASL_OAUTHBEARER_EXPECTED_AUDIENCE, new ArrayList<>(List.of(args[1])));
        configs.put(SaslConfigs.SASL_OAUTHBEARER_EXPECTED_ISSUER, args[2]);
        configs.put(SaslConfigs.SASL_OAUTHBEARER_CLOCK_SKEW_SECONDS, Integer.parseInt(args[3]));
        configs.put(SaslConfigs.SASL_OAUTHBEARER_SUB_CLAIM_NAME, SaslConfigs.DEFAULT_SASL_OAUTHBEARER_SUB_CLAIM_NAME);
        configs.put(SaslConfigs.SASL_OAUTHBEARER_SCOPE_CLAIM_NAME, SaslConfigs.DEFAULT_SASL_OAUTHBEARER_SCOPE_CLAIM_NAME);
        JwksFileVerificationKeyResolver resolver = new JwksFileVerificationKeyResolver(jwks);
        AccessTokenValidator validator = AccessTokenValidatorFactory.create(configs, resolver);
        OAuthBearerValidatorCallbackHandler handler = new OAuthBearerValidatorCallbackHandler();
        handler.init(resolver, validator);
        HexFormat hex = HexFormat.of();
        for (String line : Files.readAllLines(Path.of(args[4]))) {
            if (line.isEmpty())
                continue;
            String[] parts = line.split("\t", -1);
            StringBuilder out = new StringBuilder(parts[0]);
            OAuthBearerSaslServer server = new OAuthBearerSaslServer(handler);
            for (int i = 1; i < parts.length; i++) {
                try {
                    byte[] challenge = server.evaluateResponse(hex.parseHex(parts[i]));
                    if (server.isComplete())
                        out.append("\tCOMPLETE:").append(server.getAuthorizationID());
                    else
                        out.append("\tCHALLENGE:").append(hex.formatHex(challenge));
                } catch (Exception e) {
                    out.append("\tTHROWN:").append(e.getClass().getSimpleName()).append(':')
                        .append(String.valueOf(e.getMessage()).replace('\n', ' ').replace('\t', ' '));
                    break;
                }
            }
            System.out.println(out);
        }
    }
}
