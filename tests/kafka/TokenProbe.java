// Validates OAUTHBEARER tokens with Kafka's own broker-side validator, no broker needed: for each case an
// OAuthBearerValidatorCallbackHandler is initialised with a JwksFileVerificationKeyResolver (the resolver Kafka
// builds for sasl.oauthbearer.jwks.endpoint.url=file:...) and the AccessTokenValidator that Kafka's
// AccessTokenValidatorFactory builds from the sasl.oauthbearer.* settings, then handed an
// OAuthBearerValidatorCallback, as OAuthBearerSaslServer does.
//
// Usage: java -cp "<kafka>/libs/*" TokenProbe.java JWKS_FILE EXPECTED_ISSUER CLOCK_SKEW_SECONDS CASES_FILE
// CASES_FILE: one case a line, tab-separated: name, sub claim name, expected audiences (comma-separated, or "-" for
// none), token.
// Output, one line a case, tab-separated: name ACCEPTED principal scopes(sorted, '|'-joined)
//                                     or: name REJECTED errorStatus reason (the validator's exception message)
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

import javax.security.auth.callback.Callback;

import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerToken;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallback;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler;
import org.apache.kafka.common.security.oauthbearer.internals.secured.AccessTokenValidator;
import org.apache.kafka.common.security.oauthbearer.internals.secured.AccessTokenValidatorFactory;
import org.apache.kafka.common.security.oauthbearer.internals.secured.JwksFileVerificationKeyResolver;

public class TokenProbe {
    public static void main(String[] args) throws Exception {
        Path jwks = Path.of(args[0]);
        String issuer = args[1];
        int skew = Integer.parseInt(args[2]);
        List<String> lines = Files.readAllLines(Path.of(args[3]));
        Map<String, Object[]> handlers = new HashMap<>();
        for (String line : lines) {
            if (line.isEmpty())
                continue;
            String[] parts = line.split("\t", 4);
            String name = parts[0], subClaim = parts[1], audiences = parts[2], token = parts[3];
            Object[] pair = handlers.get(subClaim + "\t" + audiences);
            if (pair == null) {
                Map<String, Object> configs = new HashMap<>();
                configs.put(SaslConfigs.SASL_OAUTHBEARER_JWKS_ENDPOINT_URL, jwks.toUri().toString());
                configs.put(SaslConfigs.SASL_OAUTHBEARER_EXPECTED_ISSUER, issuer);
                configs.put(SaslConfigs.SASL_OAUTHBEARER_CLOCK_SKEW_SECONDS, skew);
                configs.put(SaslConfigs.SASL_OAUTHBEARER_SUB_CLAIM_NAME, subClaim);
                configs.put(SaslConfigs.SASL_OAUTHBEARER_SCOPE_CLAIM_NAME, SaslConfigs.DEFAULT_SASL_OAUTHBEARER_SCOPE_CLAIM_NAME);
                if (!audiences.equals("-"))
                    configs.put(SaslConfigs.SASL_OAUTHBEARER_EXPECTED_AUDIENCE, new ArrayList<>(Arrays.asList(audiences.split(","))));
                JwksFileVerificationKeyResolver resolver = new JwksFileVerificationKeyResolver(jwks);
                AccessTokenValidator validator = AccessTokenValidatorFactory.create(configs, resolver);
                OAuthBearerValidatorCallbackHandler handler = new OAuthBearerValidatorCallbackHandler();
                handler.init(resolver, validator);
                pair = new Object[] {handler, validator};
                handlers.put(subClaim + "\t" + audiences, pair);
            }
            OAuthBearerValidatorCallbackHandler handler = (OAuthBearerValidatorCallbackHandler) pair[0];
            AccessTokenValidator validator = (AccessTokenValidator) pair[1];
            OAuthBearerValidatorCallback callback = new OAuthBearerValidatorCallback(token);
            try {
                handler.handle(new Callback[] {callback});
            } catch (Exception e) {
                System.out.println(name + "\tREJECTED\tthrown\t" + oneLine(e.toString()));
                continue;
            }
            OAuthBearerToken validated = callback.token();
            if (validated != null) {
                System.out.println(name + "\tACCEPTED\t" + validated.principalName() + "\t"
                    + String.join("|", new TreeSet<>(validated.scope())));
                continue;
            }
            String reason;
            try {
                validator.validate(token);
                reason = "(accepted on the second try)";
            } catch (Exception e) {
                reason = e.getMessage();
            }
            System.out.println(name + "\tREJECTED\t" + callback.errorStatus() + "\t" + oneLine(reason));
        }
    }

    private static String oneLine(String text) {
        return String.valueOf(text).replace('\n', ' ').replace('\t', ' ');
    }
}
