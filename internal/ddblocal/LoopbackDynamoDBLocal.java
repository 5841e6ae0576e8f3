import java.lang.reflect.Field;

import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

/**
 * Runs DynamoDB Local like its own main class does, but listening on 127.0.0.1 only: the jar
 * has no option for the address and otherwise binds every interface. internal/ddblocal runs
 * this file with Java's source launcher (java -cp DynamoDBLocal.jar LoopbackDynamoDBLocal.java
 * [DynamoDB Local options]).
 */
public class LoopbackDynamoDBLocal {
    public static void main(String[] args) throws Exception {
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
        Field field = DynamoDBProxyServer.class.getDeclaredField("server");
        field.setAccessible(true);
        Server server = (Server) field.get(proxy);
        for (Connector c : server.getConnectors()) {
            ((ServerConnector) c).setHost("127.0.0.1");
        }
        proxy.start();
        proxy.join();
    }
}
