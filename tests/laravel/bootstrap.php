<?php
// Laravel's queue, as a Laravel app sets it up: Laravel 8.83 from Debian's
// php-laravel-framework over php-redis, the Redis connection at 127.0.0.1:PORT with PREFIX
// before every key (database.redis.options.prefix; '' for none), and a redis queue connection
// whose reservations last RETRY_AFTER seconds.
require 'Illuminate/autoload.php';

use Illuminate\Container\Container;
use Illuminate\Queue\Capsule\Manager as QueueManager;
use Illuminate\Redis\RedisManager;

function laravel_queue(int $port, string $prefix, int $retryAfter = 90): array
{
    $container = new Container;
    // What CallQueuedHandler, which runs job classes, needs from a Laravel app's container.
    $container->instance(Illuminate\Contracts\Container\Container::class, $container);
    $container->instance(
        Illuminate\Contracts\Events\Dispatcher::class,
        new Illuminate\Events\Dispatcher($container)
    );
    $container->instance(
        Illuminate\Contracts\Bus\Dispatcher::class,
        new Illuminate\Bus\Dispatcher($container)
    );
    $container->instance('redis', new RedisManager($container, 'phpredis', [
        'options' => ['prefix' => $prefix],
        'default' => ['host' => '127.0.0.1', 'port' => $port, 'database' => 0],
    ]));
    $capsule = new QueueManager($container);
    $capsule->addConnection([
        'driver' => 'redis', 'connection' => 'default', 'queue' => 'default',
        'retry_after' => $retryAfter,
    ]);
    return [$container, $capsule];
}

// The PHP side of the job both sides run: `Recorder@handle`, as the Rust job
// examples::Shared is named. It records which side ran which number on which attempt.
class Recorder
{
    public function handle($job, $data)
    {
        if (($data['fail_on'] ?? null) === 'laravel') {
            throw new RuntimeException('failing on purpose on Laravel');
        }
        // The trace context and Laravel 11's Context as a Laravel job reads them from its
        // payload, without the OpenTelemetry package.
        $payload = $job->payload();
        $context = $payload['illuminate:log:context']['data'] ?? [];
        $GLOBALS['redis']->rPush('examples:shared', json_encode([
            'side' => 'laravel',
            'n' => $data['n'],
            'attempt' => $job->attempts(),
            'uuid' => $job->uuid(),
            'traceparent' => $payload['traceparent'] ?? null,
            'request_id' => isset($context['request_id']) ? unserialize($context['request_id']) : null,
        ]));
        $job->delete();
    }
}

// A Laravel app's own job class, queued as `SendInvoice::dispatch(...)` queues it: the payload
// runs `Illuminate\Queue\CallQueuedHandler@call` on this object, serialized with PHP's
// serialize(), and encrypted with the app's key when the container has an Encrypter
// (ShouldBeEncrypted). Its Rust side is examples::SendInvoice.
class SendInvoice implements
    Illuminate\Contracts\Queue\ShouldQueue,
    Illuminate\Contracts\Queue\ShouldBeEncrypted
{
    use Illuminate\Bus\Queueable;

    public $tries = 3;
    protected $note;
    private $lines;
    // An Eloquent model, as SerializesModels queues it.
    public $customer;

    public function __construct(public int $id, string $note, array $lines)
    {
        $this->note = $note;
        $this->lines = $lines;
        $this->customer = new Illuminate\Contracts\Database\ModelIdentifier(
            'App\\Models\\Customer', 42, ['orders'], 'mysql'
        );
    }

    // What a Laravel worker runs: records what it was given, as the Rust side does.
    public function handle()
    {
        $GLOBALS['redis']->rPush('examples:invoices', json_encode([
            'side' => 'laravel',
            'id' => $this->id,
            'note' => $this->note,
            'lines' => $this->lines,
        ]));
    }
}
